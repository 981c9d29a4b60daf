/* The CRI container log: the record format kubelet reads
 * (`<RFC3339Nano UTC> <stdout|stderr> <F|P> <content>\n`), kept apart from
 * any file so that it can be tested as a pure function (log.c), and the log
 * file it is appended to, reopened after rotation (logfile.c). */
#ifndef HUSK_MONITOR_LOG_H
#define HUSK_MONITOR_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "husk/error.h"

/* The longest content of one record, as containerd's default
 * max_container_log_line_size: a longer line becomes P records of this
 * size followed by an F record with the rest. */
#define LOG_LINE_MAX 16384

/* "2016-10-06T00:17:09.669794202Z": always nine fraction digits, UTC. */
#define LOG_TIMESTAMP_LEN 30

/* Formatted records are gathered here and handed on in batches of whole
 * records; a batch always holds at least one record of the longest kind. */
#define LOG_BATCH_SIZE 65536

struct log_sink
{
  /* Takes a batch of whole records.  Errors are the sink's own business:
   * output is never held back because the file cannot take it. */
  void (*write_batch) (struct log_sink *sink, const char *records, size_t len);
  char batch[LOG_BATCH_SIZE];
  size_t batch_len;
};

/* One of the container's output streams.  The start of a line that has not
 * ended yet waits in `pending` until its newline arrives (then it is one F
 * record), it outgrows LOG_LINE_MAX (a P record), or the stream ends. */
struct log_stream
{
  const char *name; /* "stdout" or "stderr" */
  char pending[LOG_LINE_MAX];
  size_t pending_len;
};

void log_format_timestamp (const struct timespec *ts, char out[LOG_TIMESTAMP_LEN + 1]);

void log_stream_init (struct log_stream *stream, const char *name);

/* Turns DATA, read from the stream at time NOW, into records in SINK and
 * flushes the sink.  A newline ends a record and is not part of it; a \r
 * before it stays in the content (the bytes the container wrote). */
void log_stream_feed (struct log_stream *stream, struct log_sink *sink, const struct timespec *now,
                      const char *data, size_t len);

/* The stream ended: a line left without its newline is written as a P
 * record (as conmon and containerd do), so a reader that joins P records
 * onto the next F gets exactly the bytes that were written. */
void log_stream_finish (struct log_stream *stream, struct log_sink *sink, const struct timespec *now);

/* Hands the gathered records to write_batch. */
void log_sink_flush (struct log_sink *sink);

/* ------------------------------------------------------------ logfile.c */

/* The log file at PATH, opened O_APPEND (created 0640).  With MAX_SIZE > 0
 * a batch that would take the file past MAX_SIZE truncates it first: a
 * safety net, since kubelet rotates logs itself (rename, then
 * ReopenContainerLog).  A batch the file cannot take (a full disk) loses
 * whole records only: a record cut short is cut off the file again, and
 * the next batch that fits is preceded by one stderr record saying how
 * many were dropped. */
struct log_file
{
  struct log_sink sink; /* first: write_batch finds the file from it */
  char *dir;            /* the log dir PATH is opened from (no symlinks), or NULL */
  char *path;
  int fd;
  bool regular; /* a regular file: a torn record can be cut off */
  long long max_size;
  long long size;
  long long cut_to;           /* >= 0: a cut that failed, tried again before the next write */
  unsigned long long dropped; /* records lost since the last one written */
  int drop_errno;             /* why the first of them was lost */
};

/* Opens PATH (creating it, 0640) for appending.  With DIR (the pod's log
 * dir), PATH must lie under it and no component below DIR may be a
 * symlink (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS): refused,
 * naming both. */
int log_file_open (struct log_file *file, const char *dir, const char *path, long long max_size,
                   struct husk_error **err);

/* Opens PATH again (creating it), after it was moved away; the old fd is
 * closed only once the new one is open. */
int log_file_reopen (struct log_file *file, struct husk_error **err);

void log_file_close (struct log_file *file);

#endif

/* The CRI log record format: container output cut into lines, each written
 * as `<timestamp> <stream> <F|P> <content>\n`.  Pure: no I/O but through
 * the sink, the time comes from the caller. */
#include <stdio.h>
#include <string.h>

#include "cri/monitor/log.h"

/* "stdout " / "stderr " plus "F " and the newline: what a record adds. */
#define LOG_RECORD_OVERHEAD (LOG_TIMESTAMP_LEN + 1 + 6 + 1 + 2 + 1)

_Static_assert(LOG_BATCH_SIZE >= LOG_LINE_MAX + LOG_RECORD_OVERHEAD, "a batch holds the longest record");

void
log_format_timestamp (const struct timespec *ts, char out[LOG_TIMESTAMP_LEN + 1])
{
  unsigned long nanos = (unsigned long) ts->tv_nsec % 1000000000UL;
  struct tm tm;
  size_t n;

  gmtime_r (&ts->tv_sec, &tm);
  /* Exactly 19 characters until the year 10000. */
  n = strftime (out, LOG_TIMESTAMP_LEN + 1 - 11, "%Y-%m-%dT%H:%M:%S", &tm);
  if (n == 0)
    n = (size_t) snprintf (out, LOG_TIMESTAMP_LEN + 1, "9999-12-31T23:59:59");
  out[n++] = '.';
  for (int digit = 8; digit >= 0; digit--, nanos /= 10)
    out[n + (size_t) digit] = (char) ('0' + nanos % 10);
  n += 9;
  out[n++] = 'Z';
  out[n] = '\0';
}

void
log_stream_init (struct log_stream *stream, const char *name)
{
  stream->name = name;
  stream->pending_len = 0;
}

void
log_sink_flush (struct log_sink *sink)
{
  if (sink->batch_len > 0)
    sink->write_batch (sink, sink->batch, sink->batch_len);
  sink->batch_len = 0;
}

static void
append (struct log_sink *sink, const void *bytes, size_t len)
{
  memcpy (sink->batch + sink->batch_len, bytes, len);
  sink->batch_len += len;
}

/* One record whose content is the stream's pending bytes followed by
 * TAIL; the pending bytes are consumed. */
static void
emit_record (struct log_stream *stream, struct log_sink *sink, const char *timestamp, char tag,
             const char *tail, size_t tail_len)
{
  size_t name_len = strlen (stream->name);
  size_t record_len = LOG_TIMESTAMP_LEN + 1 + name_len + 3 + stream->pending_len + tail_len + 1;
  char tag_field[3] = { ' ', tag, ' ' };

  if (sink->batch_len + record_len > LOG_BATCH_SIZE)
    log_sink_flush (sink);
  append (sink, timestamp, LOG_TIMESTAMP_LEN);
  append (sink, " ", 1);
  append (sink, stream->name, name_len);
  append (sink, tag_field, sizeof tag_field);
  append (sink, stream->pending, stream->pending_len);
  append (sink, tail, tail_len);
  append (sink, "\n", 1);
  stream->pending_len = 0;
}

static void
keep_pending (struct log_stream *stream, const char *bytes, size_t len)
{
  memcpy (stream->pending + stream->pending_len, bytes, len);
  stream->pending_len += len;
}

void
log_stream_feed (struct log_stream *stream, struct log_sink *sink, const struct timespec *now,
                 const char *data, size_t len)
{
  char timestamp[LOG_TIMESTAMP_LEN + 1];

  log_format_timestamp (now, timestamp);
  while (len > 0)
    {
      const char *newline = memchr (data, '\n', len);
      size_t line_len = newline ? (size_t) (newline - data) : len;
      size_t room = LOG_LINE_MAX - stream->pending_len;

      if (line_len > room)
        {
          /* Only a line longer than LOG_LINE_MAX is cut: one of exactly
           * that size whose newline comes in the next read stays whole. */
          keep_pending (stream, data, room);
          emit_record (stream, sink, timestamp, 'P', "", 0);
          data += room;
          len -= room;
        }
      else if (newline)
        {
          emit_record (stream, sink, timestamp, 'F', data, line_len);
          data += line_len + 1;
          len -= line_len + 1;
        }
      else
        {
          keep_pending (stream, data, len);
          len = 0;
        }
    }
  log_sink_flush (sink);
}

void
log_stream_finish (struct log_stream *stream, struct log_sink *sink, const struct timespec *now)
{
  char timestamp[LOG_TIMESTAMP_LEN + 1];

  if (stream->pending_len == 0)
    return;
  log_format_timestamp (now, timestamp);
  emit_record (stream, sink, timestamp, 'P', "", 0);
  log_sink_flush (sink);
}

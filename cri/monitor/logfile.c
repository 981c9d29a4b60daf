/* The container's log file: the sink the CRI records go to.  Opened
 * O_APPEND so that kubelet (or a person) can follow it while it grows,
 * reopened on request after kubelet renamed it for rotation.  A full disk
 * drops whole records, never part of one: what a short write left of a
 * record is cut off again, and once writes work the drop is noted in the
 * log as one record of its own. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/in_root.h"
#include "husk/util.h"
#include "cri/monitor/log.h"

/* PATH under DIR (the pod's log dir) is opened from DIR with no symlink
 * followed on the way or at the end: a link planted in the log dir would
 * otherwise have the monitor (root) create or append to any host file. */
static int
open_beneath_dir (const char *dir, const char *path, struct husk_error **err)
{
  size_t dir_len = strlen (dir);
  cleanup_close int dir_fd = -1;
  int fd;

  while (dir_len > 1 && dir[dir_len - 1] == '/')
    dir_len--;
  if (strncmp (path, dir, dir_len) != 0 || path[dir_len] != '/')
    return husk_error_make (err, 0, "log file `%s`: not under the log dir `%s`", path, dir);
  dir_fd = open (dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0)
    return husk_error_make (err, errno, "open log file `%s`", path);
  fd = husk_open_beneath (dir_fd, path + dir_len + 1, O_WRONLY | O_APPEND | O_CREAT | O_NOCTTY, 0640);
  if (fd < 0 && (errno == ELOOP || errno == EXDEV))
    return husk_error_make (err, 0, "open log file `%s`: a symlink under the log dir `%s`: refused", path,
                            dir);
  if (fd < 0)
    return husk_error_make (err, errno, "open log file `%s`", path);
  return fd;
}

static int
open_log (const char *dir, const char *path, long long *size, bool *regular, struct husk_error **err)
{
  struct stat st;
  int fd = dir ? open_beneath_dir (dir, path, err)
               : open (path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640);

  if (fd < 0 && dir)
    return -1;
  if (fd < 0)
    return husk_error_make (err, errno, "open log file `%s`", path);
  *size = 0;
  *regular = false;
  if (fstat (fd, &st) == 0)
    {
      *size = (long long) st.st_size;
      *regular = S_ISREG (st.st_mode);
    }
  return fd;
}

static unsigned long long
count_records (const char *records, size_t len)
{
  unsigned long long n = 0;

  for (const char *end = records + len; (records = memchr (records, '\n', (size_t) (end - records))) != NULL;
       records++)
    n++;
  return n;
}

/* write(2) until done or failed; returns the bytes written. */
static size_t
write_some (int fd, const char *buf, size_t len)
{
  size_t done = 0;

  while (done < len)
    {
      ssize_t n = write (fd, buf + done, len - done);

      if (n > 0)
        done += (size_t) n;
      else if (n == 0)
        {
          errno = ENOSPC;
          break;
        }
      else if (errno != EINTR)
        break;
    }
  return done;
}

/* Cuts the file back to CUT_TO, where the last whole record ends.  A cut
 * that failed is tried again before the next write, and until it works
 * nothing more is appended. */
static bool
cut_back (struct log_file *file, int *errnum)
{
  if (file->cut_to < 0)
    return true;
  if (ftruncate (file->fd, (off_t) file->cut_to) < 0)
    {
      *errnum = errno;
      husk_warn ("cut the torn record off log file `%s` at %lld bytes: %s", file->path, file->cut_to,
                 strerror (errno));
      return false;
    }
  file->size = file->cut_to;
  file->cut_to = -1;
  return true;
}

/* Appends whole records.  On a short write (a full disk, a file size
 * limit) the part of a record that made it is cut off again, so that the
 * next record never continues a torn one.  Returns the bytes that stayed,
 * whole records; *ERRNUM says why the rest did not. */
static size_t
append_records (struct log_file *file, const char *records, size_t len, int *errnum)
{
  size_t written = write_some (file->fd, records, len);
  const char *last_newline;
  size_t kept;
  off_t end;

  if (written == len)
    {
      file->size += (long long) len;
      return len;
    }
  *errnum = errno;
  last_newline = written > 0 ? memrchr (records, '\n', written) : NULL;
  kept = last_newline ? (size_t) (last_newline - records) + 1 : 0;
  end = written > kept ? lseek (file->fd, 0, SEEK_CUR) : -1;
  file->size = end >= 0 ? (long long) end : file->size + (long long) kept;
  /* Not in a pipe or a terminal: what went there is gone. */
  if (written > kept && file->regular)
    {
      file->cut_to = end >= 0 ? (long long) end - (long long) (written - kept) : file->size;
      cut_back (file, &(int){ 0 });
    }
  return kept;
}

/* "<timestamp> stderr F husk-monitor: N log records were dropped: <why>",
 * with the timestamp of the record that follows it: one more line kubelet
 * parses, so that a reader knows the log has a gap. */
static bool
write_drop_note (struct log_file *file, const char *next_record, int *errnum)
{
  cleanup_free char *note
      = xasprintf ("%.*s stderr F husk-monitor: %llu log records were dropped: %s\n", LOG_TIMESTAMP_LEN,
                   next_record, file->dropped, strerror (file->drop_errno));
  size_t len = strlen (note);

  if (append_records (file, note, len, errnum) < len)
    return false;
  husk_warn ("log file `%s` takes output again; %llu records were dropped", file->path, file->dropped);
  file->dropped = 0;
  return true;
}

static void
note_dropped (struct log_file *file, unsigned long long records, int errnum)
{
  /* Warned once until the log takes output again. */
  if (file->dropped == 0)
    {
      file->drop_errno = errnum;
      husk_warn ("write log file `%s`: %s; dropping output until it works again", file->path,
                 strerror (errnum));
    }
  file->dropped += records;
}

static void
truncate_at_max_size (struct log_file *file, size_t len)
{
  if (file->max_size <= 0 || file->size <= 0 || file->size + (long long) len <= file->max_size)
    return;
  if (ftruncate (file->fd, 0) == 0)
    file->size = 0;
  else
    husk_warn ("truncate log file `%s` at --log-max-size: %s", file->path, strerror (errno));
}

/* The output is dropped rather than held: a full disk must not stop the
 * container on a full pipe. */
static void
write_batch (struct log_sink *sink, const char *records, size_t len)
{
  struct log_file *file = (struct log_file *) ((char *) sink - offsetof (struct log_file, sink));
  int errnum = 0;
  size_t kept = 0;

  if (cut_back (file, &errnum))
    {
      truncate_at_max_size (file, len);
      if (file->dropped == 0 || write_drop_note (file, records, &errnum))
        kept = append_records (file, records, len, &errnum);
    }
  if (kept < len)
    note_dropped (file, count_records (records + kept, len - kept), errnum);
}

static void
log_file_init (struct log_file *file, const char *dir, const char *path, int fd, long long size, bool regular,
               long long max_size)
{
  memset (file, 0, sizeof *file);
  file->sink.write_batch = write_batch;
  file->dir = dir ? xstrdup (dir) : NULL;
  file->path = xstrdup (path);
  file->fd = fd;
  file->regular = regular;
  file->max_size = max_size;
  file->size = size;
  file->cut_to = -1;
}

int
log_file_open (struct log_file *file, const char *dir, const char *path, long long max_size,
               struct husk_error **err)
{
  long long size;
  bool regular;
  int fd = open_log (dir, path, &size, &regular, err);

  if (fd < 0)
    return -1;
  log_file_init (file, dir, path, fd, size, regular, max_size);
  return 0;
}

int
log_file_reopen (struct log_file *file, struct husk_error **err)
{
  long long size;
  bool regular;
  int fd = open_log (file->dir, file->path, &size, &regular, err);

  if (fd < 0)
    return -1;
  /* The moved file must not end in a torn record either. */
  cut_back (file, &(int){ 0 });
  close (file->fd);
  file->fd = fd;
  file->size = size;
  file->regular = regular;
  file->cut_to = -1;
  return 0;
}

void
log_file_close (struct log_file *file)
{
  log_sink_flush (&file->sink);
  if (file->dropped > 0)
    husk_warn ("log file `%s`: the last %llu records were dropped: %s", file->path, file->dropped,
               strerror (file->drop_errno));
  if (file->fd >= 0)
    close (file->fd);
  file->fd = -1;
  free (file->path);
  file->path = NULL;
  free (file->dir);
  file->dir = NULL;
}

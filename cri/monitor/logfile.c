/* The container's log file: the sink the CRI records go to.  Opened
 * O_APPEND so that kubelet (or a person) can follow it while it grows,
 * reopened on request after kubelet renamed it for rotation. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "husk/util.h"
#include "cri/monitor/log.h"

static int
open_log (const char *path, long long *size, struct husk_error **err)
{
  struct stat st;
  int fd = open (path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640);

  if (fd < 0)
    return husk_error_make (err, errno, "open log file `%s`", path);
  *size = fstat (fd, &st) == 0 ? (long long) st.st_size : 0;
  return fd;
}

static void
write_batch (struct log_sink *sink, const char *records, size_t len)
{
  struct log_file *file = (struct log_file *) ((char *) sink - offsetof (struct log_file, sink));

  if (file->max_size > 0 && file->size > 0 && file->size + (long long) len > file->max_size)
    {
      if (ftruncate (file->fd, 0) == 0)
        file->size = 0;
      else
        husk_warn ("truncate log file `%s` at --log-max-size: %s", file->path, strerror (errno));
    }
  if (husk_write_all (file->fd, records, len) < 0)
    {
      /* The output is dropped rather than held: a full disk must not stop
       * the container on a full pipe. */
      if (!file->write_failing)
        husk_warn ("write log file `%s`: %s; dropping output until it works again", file->path,
                   strerror (errno));
      file->write_failing = true;
      return;
    }
  file->write_failing = false;
  file->size += (long long) len;
}

int
log_file_open (struct log_file *file, const char *path, long long max_size, struct husk_error **err)
{
  int fd = open_log (path, &file->size, err);

  if (fd < 0)
    return -1;
  file->sink.write_batch = write_batch;
  file->sink.batch_len = 0;
  file->path = xstrdup (path);
  file->fd = fd;
  file->max_size = max_size;
  file->write_failing = false;
  return 0;
}

int
log_file_reopen (struct log_file *file, struct husk_error **err)
{
  long long size;
  int fd = open_log (file->path, &size, err);

  if (fd < 0)
    return -1;
  close (file->fd);
  file->fd = fd;
  file->size = size;
  file->write_failing = false;
  return 0;
}

void
log_file_close (struct log_file *file)
{
  log_sink_flush (&file->sink);
  if (file->fd >= 0)
    close (file->fd);
  file->fd = -1;
  free (file->path);
  file->path = NULL;
}

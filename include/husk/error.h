/* The one error type of husk.  A function that can fail takes
 * `struct husk_error **err`, returns a negative int and fills *err with a
 * message saying what was being done and to what.  Callers add context with
 * husk_error_wrap() and return.  Library code never exits the process. */
#ifndef HUSK_ERROR_H
#define HUSK_ERROR_H

#include <stdarg.h>
#include <stddef.h>
#include <time.h>

struct husk_error
{
  int errnum; /* errno that caused it, or 0 */
  char *msg;  /* one line, no trailing newline */
};

/* Builds an error; appends ": strerror(errnum)" when errnum != 0.  If *err
 * already holds an error it is replaced.  Always returns -1. */
int husk_error_make (struct husk_error **err, int errnum, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
int husk_error_makev (struct husk_error **err, int errnum, const char *fmt, va_list ap);

/* An error husk found itself (bad input, a wrong state, an unknown id):
 * the message is FMT alone, no strerror, and errnum says its kind
 * (EINVAL, ENOENT, EEXIST, EAGAIN, ...) to callers that map it, as the
 * CRI server maps it to a gRPC status.  Always returns -1. */
int husk_error_kind (struct husk_error **err, int errnum, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
int husk_error_kindv (struct husk_error **err, int errnum, const char *fmt, va_list ap);

/* Prefixes "fmt: " to the message in *err (which must be set).  Returns -1. */
int husk_error_wrap (struct husk_error **err, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

void husk_error_free (struct husk_error **err);

/* Prints "PROG: MSG\n" to stderr and frees the error. */
void husk_error_report (struct husk_error **err, const char *prog);

/* A log sink for warnings and debug lines (stderr by default).  The runtime
 * CLI points it at --log with text or json format. */
enum husk_log_level
{
  HUSK_LOG_ERROR,
  HUSK_LOG_WARNING,
  HUSK_LOG_INFO,
  HUSK_LOG_DEBUG,
};

void husk_log_set_file (int fd, int json);
void husk_log_set_level (enum husk_log_level level);
void husk_log_set_prog (const char *prog);
/* A daemon's lines: text lines open with an RFC 3339 UTC time to the
 * microsecond and the level ("2026-12-03T16:05:01.123456Z warning: ...")
 * in place of "PROG: LEVEL: ".  JSON lines always carry their time. */
void husk_log_set_timestamps (int on);
int husk_log_is_redirected (void);
/* True when a line at LEVEL would be written (to skip building costly
 * fields). */
int husk_log_enabled (enum husk_log_level level);
void husk_log (enum husk_log_level level, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

/* A key and value a line carries besides its message: in JSON a member of
 * the line's object (a number when NUMBER and VALUE is one), in text
 * " KEY=VALUE" after the message, the value in double quotes (with \" and
 * \\) when it is empty or holds a space, a quote, a backslash or '='.
 * KEY is [a-z_]+; a NULL VALUE leaves the field out. */
struct husk_log_field
{
  const char *key;
  const char *value;
  int number;
};

void husk_log_fields (enum husk_log_level level, const struct husk_log_field *fields, size_t n_fields,
                      const char *fmt, ...) __attribute__ ((format (printf, 4, 5)));
/* The line husk_log_fields writes for MSG at time NOW (CLOCK_REALTIME)
 * into BUF (at most SIZE - 1 bytes and a NUL; a longer line is cut, and
 * still ends in a newline; a JSON one still parses).  Returns its length.
 * For tests. */
size_t husk_log_format (char *buf, size_t size, enum husk_log_level level, const struct timespec *now,
                        const struct husk_log_field *fields, size_t n_fields, const char *msg);
#define husk_warn(...) husk_log (HUSK_LOG_WARNING, __VA_ARGS__)
#define husk_debug(...) husk_log (HUSK_LOG_DEBUG, __VA_ARGS__)

#endif

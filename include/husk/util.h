/* Small helpers shared by every component: allocation that cannot fail,
 * whole-file I/O, atomic writes, directories. */
#ifndef HUSK_UTIL_H
#define HUSK_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>
#include <sys/types.h>

#include "husk/error.h"

#define HUSK_VERSION "0.1.0"

/* Abort on out-of-memory: there is no sane recovery in a runtime. */
void *xmalloc (size_t size);
void *xcalloc (size_t n, size_t size);
void *xrealloc (void *ptr, size_t size);
char *xstrdup (const char *s);
char *xasprintf (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

/* Reads a whole file (NUL-terminated; *len excludes the NUL). */
int husk_read_file (const char *path, char **out, size_t *len, struct husk_error **err);
int husk_read_fd (int fd, char **out, size_t *len, const char *what, struct husk_error **err);
/* FD's whole content again, read from offset 0 with pread (a proc or
 * cgroup file regenerates it there).  A short read is taken for the end:
 * such a file is produced whole by one read. */
int husk_reread_fd (int fd, char **out, size_t *len, const char *what, struct husk_error **err);

/* write(2) until done, retrying EINTR. */
int husk_write_all (int fd, const void *buf, size_t len);

/* Writes path.tmp, fsyncs, renames over path: for state that must survive
 * a crash of the machine. */
int husk_write_file_atomic (const char *path, const void *data, size_t len, mode_t mode,
                            struct husk_error **err);
/* The same without fsync: readers never see a torn file, but a power loss
 * may lose it.  For volatile state under /run. */
int husk_write_file_replace (const char *path, const void *data, size_t len, mode_t mode,
                             struct husk_error **err);
/* husk_write_file_atomic in two steps, so that a lock need be held only
 * for the rename: PREPARE writes and fsyncs PATH's temp file (*TMP, which
 * the caller passes on), COMMIT renames it over PATH, DISCARD removes it
 * instead; both free *TMP and set it NULL. */
int husk_write_file_prepare (const char *path, const void *data, size_t len, mode_t mode, char **tmp,
                             struct husk_error **err);
int husk_write_file_commit (char **tmp, const char *path, struct husk_error **err);
void husk_write_file_discard (char **tmp);
/* Removes the temp files those two leave when their writer dies before the
 * rename (PATH.tmp.PID.TID whose PID is gone), in DIR and LEVELS levels of
 * directories below it, on DIR's filesystem only.  *REMOVED: their paths
 * (NULL-terminated; the caller frees). */
int husk_remove_stale_tmp (const char *dir, int levels, char ***removed, struct husk_error **err);
/* Writes an existing file in place (for /proc and cgroup files). */
int husk_write_file (const char *path, const char *data, size_t len, struct husk_error **err);

int husk_mkdir_p (const char *path, mode_t mode, struct husk_error **err);
/* rm -rf that does not cross mount points. */
int husk_rm_rf (const char *path, struct husk_error **err);
/* The same for NAME (one component, never followed if a symlink) inside
 * the directory PARENT_FD, staying on PARENT_FD's filesystem. */
int husk_rm_rf_at (int parent_fd, const char *name, struct husk_error **err);

bool husk_str_has_prefix (const char *s, const char *prefix);
bool husk_str_has_suffix (const char *s, const char *suffix);

/* The last pid of the NSpid line of a /proc/PID/status text (the pid in
 * the process's own pid namespace), or 0 where it has none.  No
 * allocation: a vfork child may call it. */
long husk_status_ns_pid (const char *status);

/* Parses a decimal int64 with range check. */
int husk_parse_int64 (const char *s, long long min, long long max, long long *out);

/* Number of entries in a NULL-terminated string vector. */
size_t husk_strv_len (char *const *v);
/* Whether V (NULL-terminated, or NULL) holds a string equal to S. */
bool husk_strv_contains (char *const *v, const char *s);
/* The N strings of V, sorted (strcmp), in a new NULL-terminated array
 * that shares V's strings: for many husk_sorted_strv_contains lookups. */
char **husk_strv_sorted_copy (char *const *v, size_t n);
/* S is one of the N strings of SORTED (from husk_strv_sorted_copy). */
bool husk_sorted_strv_contains (char *const *sorted, size_t n, const char *s);

/* CLOCK's time now in nanoseconds (CLOCK_REALTIME, CLOCK_MONOTONIC...). */
int64_t husk_clock_ns (clockid_t clock);
/* Milliseconds from now (CLOCK_MONOTONIC) to DEADLINE, 0 once passed. */
int husk_ms_until (const struct timespec *deadline);
/* Appends a copy of S to V (which may be NULL); returns the new vector. */
char **husk_strv_append (char **v, const char *s);

/* The mount points of this mount namespace's cgroup hierarchies, from
 * /proc/self/mountinfo: v1 and v2, or (NAMED_V1_ONLY) only the named v1
 * ones (name=systemd), which hold no controller.  A NULL-terminated
 * vector, empty when none or mountinfo cannot be read. */
char **husk_cgroup_mounts (bool named_v1_only);

/* The option getopt_long just refused, as the user typed it: "-x" for a
 * short option (written into BUF), else the argument itself (a long
 * option, whose optopt is its code, not a character). */
const char *husk_getopt_bad_option (char **argv, char buf[3]);

#endif

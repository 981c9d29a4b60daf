/* Unix sockets at any path length: sun_path holds 107 bytes, and a path
 * under a long state dir (a test's temp dir, a 64-digit container id) can
 * be longer.  Such a path is reached as /proc/self/fd/N/NAME through an
 * O_PATH fd of its folder, which is short whatever the folder. */
#ifndef HUSK_UNIX_SOCKET_H
#define HUSK_UNIX_SOCKET_H

#include <sys/types.h>

#include "husk/error.h"

/* A socket of TYPE (SOCK_STREAM, SOCK_SEQPACKET; CLOEXEC and NONBLOCK
 * added) bound at PATH with MODE and listening.  A socket file already at
 * PATH (left by a killed owner) is replaced; any other file is an error.
 * Sets the umask around bind: for single-threaded callers (the monitor). */
int husk_unix_listen (const char *path, int type, unsigned mode, struct husk_error **err);

/* A socket of TYPE (CLOEXEC added, blocking) connected to PATH. */
int husk_unix_connect (const char *path, int type, struct husk_error **err);

/* Sends FD over the unix socket SOCK in one message with LEN (>= 1) bytes
 * of DATA.  0, or -1 with errno. */
int husk_unix_send_fd (int sock, int fd, const void *data, size_t len);

/* Receives one message of at most LEN bytes into DATA (*GOT: how many,
 * when GOT is not NULL) and the one fd it carries, CLOEXEC.  The fd, or
 * -1 with errno: EPROTO when the message carried no fd. */
int husk_unix_recv_fd (int sock, void *data, size_t len, ssize_t *got);

#endif

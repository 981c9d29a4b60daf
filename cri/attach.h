/* The monitor's attach socket, as CRI Attach reaches a running container's
 * stdio through it.  Drawn as a protocol (husk-monitor --attach-socket):
 *
 *   monitor                                   client (huskd's streaming)
 *   listens on STATE/exits/<id>.attach, AF_UNIX SOCK_SEQPACKET, mode 0600,
 *   for the container's whole life; any number of clients at once
 *                  <── connect
 *   OUT_STDOUT|data ──>   a copy of what goes to the CRI log, raw; a TTY's
 *   OUT_STDERR|data ──>   output is stdout; data <= ATTACH_DATA_MAX
 *                  <── IN_STDIN|data     to the container's stdin
 *                  <── IN_CLOSE_STDIN    EOF (a TTY gets ^D)
 *                  <── IN_RESIZE|rows|cols   uint16 LE each (TTY only)
 *   OUT_EXIT|"N" ──>      the container exited with code N (decimal);
 *                         then the monitor closes the connection
 *   OUT_ERROR|text ──>    the client is dropped (why, one line); then the
 *                         monitor closes the connection
 *
 * Byte 0 of every message is its type.  Stdin messages to a container
 * without stdin are ignored.  Output a client's socket cannot take waits
 * in a bounded queue of its own; while a queue is full the monitor stops
 * reading the container's output (back-pressure), for at most a few
 * seconds without progress, then drops that client with OUT_ERROR (or,
 * when even that cannot be sent, just closes it): a connection that ends
 * without OUT_EXIT did not get all the output. */
#ifndef HUSK_CRI_ATTACH_H
#define HUSK_CRI_ATTACH_H

#include <stddef.h>
#include <sys/types.h>

#include "husk/error.h"

/* Most data bytes in one message, either way. */
#define ATTACH_DATA_MAX 32768

enum attach_out_type
{
  ATTACH_OUT_STDOUT = 1,
  ATTACH_OUT_STDERR = 2,
  ATTACH_OUT_EXIT = 3,
  ATTACH_OUT_ERROR = 4,
};

enum attach_in_type
{
  ATTACH_IN_STDIN = 0,
  ATTACH_IN_CLOSE_STDIN = 1,
  ATTACH_IN_RESIZE = 2,
};

/* Path of container ID's attach socket under huskd's state dir
 * (STATE/exits/<id>.attach, next to its exit file; malloc'd). */
char *cri_attach_socket_path (const char *state_dir, const char *id);

/* Connects to it; returns the fd (SOCK_SEQPACKET, blocking) or -1 with
 * *err set ("container X has no attach socket (monitor gone?)"). */
int cri_attach_connect (const char *state_dir, const char *id, struct husk_error **err);

/* Send one client message each; 0, or -1 with errno set.  Data longer than
 * ATTACH_DATA_MAX goes as several messages.  Blocking, as the fd is. */
int cri_attach_send_stdin (int fd, const void *data, size_t len);
int cri_attach_close_stdin (int fd);
int cri_attach_resize (int fd, unsigned rows, unsigned cols);

/* Reads one server message from FD into BUF (at least 1 + ATTACH_DATA_MAX
 * bytes): returns its length (BUF[0] is its type), 0 when the monitor
 * closed the connection, -1 with errno set. */
ssize_t cri_attach_receive (int fd, void *buf, size_t size);

#endif

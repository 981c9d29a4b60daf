/* The monitor's end of the attach socket (protocol in cri/container/attach.h): the
 * listening socket, its clients, copies of the output to them, and the
 * decoding of what they send. */
#ifndef HUSK_MONITOR_ATTACH_H
#define HUSK_MONITOR_ATTACH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "husk/error.h"
#include "cri/container/attach.h"

struct attach_server
{
  int listen_fd; /* -1 without --attach-socket, and once closed */
  char *path;
  int *clients;
  size_t n_clients;
};

/* One client message, decoded; DATA points into the message. */
struct attach_request
{
  enum attach_in_type type;
  const char *data;
  size_t len;
  unsigned rows, cols;
};

/* Fills REQ from MSG (LEN bytes); -1 for a message that is not one of
 * the protocol's (empty, an unknown type, a resize of the wrong length). */
int attach_decode_request (const char *msg, size_t len, struct attach_request *req);

int attach_listen (struct attach_server *server, const char *path, struct husk_error **err);

/* Takes every connection waiting on the listening socket. */
void attach_accept (struct attach_server *server);

/* Sends TYPE|DATA to every client, without waiting: a client that cannot
 * take it now is dropped. */
void attach_broadcast (struct attach_server *server, enum attach_out_type type, const char *data, size_t len);

/* Receives one message from client INDEX into BUF: its length, or -1
 * when the client is gone or broke the protocol (then it is dropped). */
ssize_t attach_receive (struct attach_server *server, size_t index, char *buf, size_t size);

void attach_drop_client (struct attach_server *server, size_t index);

/* The container exited with EXIT_CODE: tells every client, closes them. */
void attach_finish (struct attach_server *server, int exit_code);

/* Closes the listening socket and removes its file. */
void attach_close (struct attach_server *server);

#endif

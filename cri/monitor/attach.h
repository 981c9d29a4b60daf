/* The monitor's end of the attach socket (protocol in cri/attach.h): the
 * listening socket, its clients, copies of the output to them, and the
 * decoding of what they send. */
#ifndef HUSK_MONITOR_ATTACH_H
#define HUSK_MONITOR_ATTACH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "husk/error.h"
#include "cri/attach.h"

/* Room for bursts of output to a client that reads slowly, beyond its
 * socket buffer: past this the client is full, and the monitor stops
 * reading the container's output (back-pressure) until it has read half of
 * it, for at most ATTACH_STALL_MS; then it is dropped with an error. */
#define ATTACH_QUEUE_MAX (8 * 1024 * 1024)
#define ATTACH_STALL_MS 5000
/* Once the container exited: how long the clients have to take what is
 * queued for them, all together. */
#define ATTACH_FINISH_MS 10000

struct attach_client
{
  int fd;
  /* Messages the socket could not take yet, each as a 4-byte length and
   * its bytes; sent in order once it can. */
  char *queue;
  size_t queue_len, queue_off;
  long long full_since_ms; /* CLOCK_MONOTONIC; 0 while not full */
};

struct attach_server
{
  int listen_fd; /* -1 without --attach-socket, and once closed */
  char *path;
  struct attach_client *clients;
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

/* Adds FD (non-blocking) as a client. */
void attach_add_client (struct attach_server *server, int fd);

/* Sends TYPE|DATA to every client: what its socket cannot take now waits
 * in its queue. */
void attach_broadcast (struct attach_server *server, enum attach_out_type type, const char *data, size_t len);

/* Whether client INDEX has messages waiting (poll it for POLLOUT). */
bool attach_client_waiting (const struct attach_server *server, size_t index);

/* Whether some client is full: the container's output waits until it is
 * not (see ATTACH_QUEUE_MAX). */
bool attach_backpressure (const struct attach_server *server);

/* Sends what client INDEX's socket takes now of its queue. */
void attach_flush (struct attach_server *server, size_t index);

/* Drops every client that stayed full for ATTACH_STALL_MS, with an error
 * message; returns the milliseconds until the next one would be, or -1. */
int attach_expire (struct attach_server *server);

/* Receives one message from client INDEX into BUF: its length, or -1
 * when the client is gone or broke the protocol (then it is dropped). */
ssize_t attach_receive (struct attach_server *server, size_t index, char *buf, size_t size);

void attach_drop_client (struct attach_server *server, size_t index);

/* The container exited with EXIT_CODE: gives every client what is queued
 * for it (within ATTACH_FINISH_MS), tells it the exit code and closes it;
 * one that cannot take it all in time is dropped with an error. */
void attach_finish (struct attach_server *server, int exit_code);

/* Closes the listening socket and removes its file. */
void attach_close (struct attach_server *server);

#endif

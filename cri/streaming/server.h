/* The streaming server kubelet hands URLs to (Exec, Attach, PortForward):
 * HTTP/1.1 through the shared front door of http.h (request heads read on
 * one thread, at most STREAMING_MAX_HEADS at once, each within
 * HTTP_HEAD_TIMEOUT_MS), a one-time token per URL, one thread per session
 * whose token was good (at most STREAMING_MAX_SESSIONS), and SPDY/3.1 or
 * WebSocket with the k8s channel protocols after the Upgrade:
 *
 *   client                                   server
 *   POST /exec/TOKEN  Upgrade: SPDY/3.1
 *     X-Stream-Protocol-Version: v4...  -->  token taken, protocol chosen
 *                                       <--  101 Switching Protocols
 *   SYN_STREAM streamType=error|stdin|
 *     stdout|stderr|resize              -->  SYN_REPLY each
 *                                            all expected streams there:
 *                                            callbacks.run on a new thread
 *   DATA stdin / resize                 -->  into io.stdin_fd / io.resize_fd
 *                                       <--  DATA stdout / stderr
 *                                            run returns the exit code
 *                                       <--  FIN stdout, stderr; the status
 *                                            on the error stream, FIN
 *
 *   POST /portforward/TOKEN (portforward.k8s.io): per requestID a pair of
 *   streams, streamType=error and data, with a `port` header;
 *   callbacks.connect_port gives a socket, and bytes flow both ways.
 *   Over WebSocket (v4.channel.k8s.io, as kubelet serves it) the ports are
 *   the request's: port N of the list has data channel 2N and error
 *   channel 2N+1, each opened by the server with the port number (2 bytes,
 *   little-endian); the session ends when every target has closed.
 *
 * The server knows no CRI message: cri/ describes a session when it asks
 * for a URL and says in its callbacks what running one means. */
#ifndef HUSK_CRI_STREAMING_SERVER_H
#define HUSK_CRI_STREAMING_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "husk/error.h"

/* Sessions: connections that brought a good token (and so came from
 * someone the CRI gave a URL).  Heads: connections still sending their
 * request head, whoever they are; when full, the oldest is closed. */
#define STREAMING_MAX_SESSIONS 256
#define STREAMING_MAX_HEADS 512
#define STREAMING_MAX_PENDING 1000
#define STREAMING_DEFAULT_TOKEN_TTL_MS 60000
/* A WebSocket port forward has two one-byte channels per port. */
#define STREAMING_MAX_PORTS 127

enum streaming_kind
{
  STREAMING_EXEC,
  STREAMING_ATTACH,
  STREAMING_PORTFORWARD,
};

struct streaming_request
{
  enum streaming_kind kind;
  bool want_stdin, want_stdout, want_stderr, tty;
  uint16_t ports[STREAMING_MAX_PORTS]; /* port forward: the ports asked for (WebSocket uses them) */
  unsigned n_ports;
  void *data;                     /* the caller's: handed to its callbacks */
  void (*free_data) (void *data); /* called once the session is over or the token is gone */
};

/* A terminal size, from the resize stream. */
struct streaming_resize
{
  uint16_t width, height;
};

/* What an exec or attach runs with.  The fds stay the server's: the run
 * callback may dup them into a child, and must not close them. */
struct streaming_io
{
  int stdin_fd;  /* read end: the client's stdin; EOF when it closed it.  -1: none */
  int stdout_fd; /* write ends: to the client.  -1: none */
  int stderr_fd;
  int resize_fd; /* read end of struct streaming_resize records; -1 without a tty */
  int cancel_fd; /* readable once the client has gone: stop the process and return */
  bool tty;
};

struct streaming_callbacks
{
  /* Exec and attach, on a thread of its own: the exit code (>= 0), or -1
   * and *ERR (which the client gets on the error stream). */
  int (*run) (void *user, enum streaming_kind kind, void *data, const struct streaming_io *io,
              struct husk_error **err);
  /* Port forward: a connected stream socket to PORT of the pod DATA
   * names, or -1 and *ERR. */
  int (*connect_port) (void *user, void *data, uint16_t port, struct husk_error **err);
  void *user;
};

struct streaming_options
{
  const char *address;     /* numeric IPv4 or IPv6; NULL: 127.0.0.1 */
  const char *port;        /* NULL or "0": a free one */
  int64_t token_ttl_ms;    /* 0: STREAMING_DEFAULT_TOKEN_TTL_MS */
  int64_t stream_wait_ms;  /* how long a client has to open its streams; 0: 30 s */
  int64_t head_timeout_ms; /* how long a client has to send its request head; 0: HTTP_HEAD_TIMEOUT_MS */
};

struct streaming_server;

int streaming_server_start (const struct streaming_options *opts, const struct streaming_callbacks *cb,
                            struct streaming_server **out, struct husk_error **err);
/* Stops listening, ends every session (their run callbacks see cancel_fd)
 * and waits for their threads. */
void streaming_server_stop (struct streaming_server *srv);

/* A one-time URL for REQ (malloc'd), which owns REQ->data from now on
 * (freed here on failure). */
char *streaming_server_url (struct streaming_server *srv, const struct streaming_request *req,
                            struct husk_error **err);

/* "http://ADDRESS:PORT", the base of the URLs. */
const char *streaming_server_base (const struct streaming_server *srv);
/* Sessions (connections past their token) being served now. */
unsigned streaming_server_sessions (struct streaming_server *srv);

#endif

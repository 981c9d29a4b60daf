/* systemd's notification protocol (sd_notify(3)), written here rather than
 * linking libsystemd: a service of Type=notify finds the datagram socket
 * systemd listens on in $NOTIFY_SOCKET (a path, or "@name" in the abstract
 * namespace) and sends it newline-separated VAR=VALUE lines: READY=1 once
 * it serves, STATUS=... for `systemctl status`, STOPPING=1 as it stops. */
#ifndef HUSK_SD_NOTIFY_H
#define HUSK_SD_NOTIFY_H

#include <sys/socket.h>
#include <sys/un.h>

#include "husk/error.h"

struct sd_notifier
{
  int fd; /* -1: no NOTIFY_SOCKET, every send is a no-op */
  struct sockaddr_un addr;
  socklen_t addr_len;
  char *name; /* $NOTIFY_SOCKET as given, for errors */
};

/* Takes $NOTIFY_SOCKET and removes it from the environment, so that
 * children (monitors, runtimes, CNI plugins) do not inherit it.  0 when it
 * is unset or empty (notifier->fd is -1 then), 1 when a socket is ready,
 * -1 when the value is not an absolute path or @name, or is too long. */
int sd_notifier_open (struct sd_notifier *notifier, struct husk_error **err);
/* Sends STATE ("READY=1\nSTATUS=serving") as one datagram.  0 when sent or
 * when there is no socket; -1 with the reason (systemd not listening). */
int sd_notifier_send (struct sd_notifier *notifier, const char *state, struct husk_error **err);
void sd_notifier_close (struct sd_notifier *notifier);

#endif

/* huskd's configuration: built-in defaults, optionally overridden by a JSON
 * file (--config).  Errors name the file, line and column, or the key. */
#ifndef HUSK_CRI_CONFIG_H
#define HUSK_CRI_CONFIG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "husk/error.h"

#define HUSKD_DEFAULT_LISTEN "unix:///run/husk/husk.sock"
#define HUSKD_DEFAULT_ROOT "/var/lib/husk"
#define HUSKD_DEFAULT_STATE "/run/husk"
/* Read when it exists and no --config is given. */
#define HUSKD_DEFAULT_CONFIG "/etc/husk/huskd.json"

/* At most this many global flags ("args") per runtime. */
#define HUSKD_RUNTIME_MAX_ARGS 16

/* An OCI runtime a CRI runtime_handler can pick. */
struct huskd_runtime
{
  char *name; /* the runtime_handler ("" means the default) */
  char *path; /* the binary */
  char *root; /* its --root */
  /* Global flags put before every verb (runsc's --platform=ptrace);
   * NULL-terminated, never NULL. */
  char **args;
  /* "sandbox": "runtime": the handler owns the pod (gVisor's runsc): the
   * pod's infra container is created through it and every app container
   * joins it by the sandbox-id annotation, started by its monitor. */
  bool owns_pod;
  /* Found by cri/runtime_probe.c when huskd starts: */
  bool console_size; /* `exec --console-size` (husk's extension, in its features) */
  char *unusable;    /* why it cannot run containers here; NULL: it can */
  /* ExecSync's exec and a stop's kill from huskd itself
   * (cri_runtime_in_process): 0 not known yet, 1 yes (the binary is this
   * build's husk), -1 no. */
  int in_process;
};

struct huskd_config
{
  char *listen;
  char *root;  /* persistent: images, containers */
  char *state; /* volatile: runtime state, sockets, exit files */
  char *default_runtime;
  struct huskd_runtime *runtimes;
  size_t n_runtimes;
  char *cni_conf_dir;
  char *cni_bin_dirs;
  char *registries_file; /* hosts config of the image library; NULL: its default */
  char **default_capabilities;
  char *seccomp_profile;   /* a file; NULL: the built-in default */
  json_t *seccomp_default; /* seccomp_profile's contents, read at load */
  char *log_level;
  char *log_format; /* "text" or "json" */
  /* The streaming server of Exec, Attach and PortForward: a numeric
   * address, a port ("0": a free one), the seconds its URLs live. */
  char *stream_address;
  char *stream_port;
  unsigned long long stream_token_ttl_s;
  /* How often the writable layers' disk usage the stats RPCs give is
   * measured again (containerd's stats_collect_period). */
  unsigned long long stats_collect_period_s;
  /* Image pulls: decompressed bytes per image (a manifest declaring more is
   * refused before any download); a blob transfer slower than
   * pull_min_bytes_per_s for pull_stall_timeout_s fails. */
  unsigned long long max_image_bytes;
  unsigned long long pull_min_bytes_per_s;
  unsigned long long pull_stall_timeout_s;
  /* CDI spec dirs (NULL-terminated; a later one wins for the same device). */
  char **cdi_spec_dirs;
  /* Where CreateContainer takes NVIDIA_VISIBLE_DEVICES from
   * (enum cdi_nvidia_env: off, container-config, image-too). */
  int nvidia_visible_devices;
  /* cpuset.mems = the NUMA nodes of the container's CDI devices. */
  bool cdi_numa_align;
  /* Prometheus metrics over plain HTTP on "HOST:PORT" ("[::1]:PORT",
   * port 0: a free one); NULL: off. */
  char *metrics_address;
  /* "cgroupfs" or "systemd": the form of the pods' cgroup parents (as
   * kubelet's cgroupDriver); default systemd when the node booted with
   * systemd (/run/systemd/system exists), else cgroupfs. */
  char *cgroup_driver;
};

/* Fills CFG with the defaults, then applies PATH if not NULL. */
int huskd_config_load (const char *path, struct huskd_config *cfg, struct husk_error **err);
/* After command-line overrides: adds the runtimes found on the machine
 * (their roots under cfg->state) and checks the default one exists. */
int huskd_config_finish (struct huskd_config *cfg, const char *path, struct husk_error **err);
void huskd_config_clear (struct huskd_config *cfg);

/* The effective configuration as a config file would say it (every key,
 * defaults included): `huskd --print-config`, and what huskd_config_load
 * reads back to the same settings. */
json_t *huskd_config_to_json (const struct huskd_config *cfg);
/* True when cfg->cgroup_driver is systemd. */
bool huskd_config_systemd_cgroup (const struct huskd_config *cfg);

/* The runtime for HANDLER (NULL or "" = default); NULL when unknown. */
/* The configured handlers' names, "a, b, c", the default first (malloc'd):
 * for errors that name an unknown one. */
char *huskd_config_runtime_names (const struct huskd_config *cfg);
const struct huskd_runtime *huskd_config_runtime (const struct huskd_config *cfg, const char *handler);

#endif

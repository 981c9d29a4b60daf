/* CheckpointContainer (KEP-2008): the runtime's `checkpoint
 * --leave-running` of a running container, with its OCI config, the
 * changes of its writable layer and its log, packed into the archive
 * kubelet asked for in CRI-O's layout (cri/container/checkpoint_archive.h).  The
 * container keeps running; a failure leaves no archive and no work dir,
 * and the work dir is under huskd's root (swept at start), never beside
 * the location. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cri/container/checkpoint_archive.h"
#include "cri/container/container_store.h"
#include "cri/container/containers.h"
#include "cri/config/runtime_exec.h"
#include "cri/server/service.h"
#include "husk/cleanup.h"
#include "husk/util.h"

/* Everything one checkpoint made so far, removed again by one undo. */
struct checkpoint_job
{
  struct cri_service *svc;
  const char *location;
  struct cri_container *c;
  const struct huskd_runtime *rt;
  char *work;     /* ROOT/checkpoints/work-XXXXXX: the archive's contents */
  char *target;   /* WORK.target: names tmp_file, for the sweep after a crash */
  char *tmp_file; /* LOCATION.tmp-PID: the archive until renamed */
};

/* Work dirs live under huskd's root, never beside the location: a huskd
 * killed mid-checkpoint leaves them (a memory dump, with a real criu)
 * where the next one sweeps them at start (cri_checkpoint_sweep). */
static char *
work_parent (const struct cri_service *svc)
{
  return xasprintf ("%s/checkpoints", svc->cfg->root);
}

static int
check_request (const Runtime__V1__CheckpointContainerRequest *req, struct husk_error **err)
{
  if (!cri_nonempty (req->container_id))
    return husk_error_kind (err, EINVAL, "container_id: required");
  if (!cri_nonempty (req->location) || req->location[0] != '/')
    return husk_error_kind (err, EINVAL,
                            "location `%s`: the absolute path of the archive to write is required",
                            req->location ? req->location : "");
  if (access (req->location, F_OK) == 0)
    return husk_error_kind (err, EEXIST, "location `%s` exists already", req->location);
  return 0;
}

static int
claim_container (struct checkpoint_job *job, const char *id, struct husk_error **err)
{
  if (container_lookup (job->svc->containers, id, &job->c, err) < 0)
    return -1;
  if (job->c->state != CRI_CONTAINER_RUNNING)
    return husk_error_kind (err, EAGAIN, "container %s is not running", job->c->id);
  job->rt = cri_runtime_for (job->svc->cfg, job->c->runtime_handler, err);
  return job->rt ? 0 : -1;
}

static int
write_text (const char *dir, const char *name, const char *text, struct husk_error **err)
{
  cleanup_free char *path = xasprintf ("%s/%s", dir, name);

  return husk_write_file_atomic (path, text, strlen (text), 0600, err);
}

static int
copy_file (const char *from, const char *dir, const char *name, struct husk_error **err)
{
  cleanup_free char *text = NULL;
  size_t len = 0;

  if (husk_read_file (from, &text, &len, err) < 0)
    return -1;
  {
    cleanup_free char *path = xasprintf ("%s/%s", dir, name);
    return husk_write_file_atomic (path, text, len, 0600, err);
  }
}

/* The container's log into DIR: never through a symlink put in its place
 * (the archive would carry the host file it points to). */
static int
copy_log (const char *log_path, const char *dir, struct husk_error **err)
{
  cleanup_close int fd = open (log_path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  cleanup_free char *text = NULL, *path = NULL;
  struct stat st;
  size_t len = 0;

  if (fd < 0 && errno == ELOOP)
    return husk_error_kind (err, EINVAL, "container log `%s`: a symlink: refused", log_path);
  if (fd < 0 || fstat (fd, &st) < 0)
    return husk_error_make (err, errno, "container log `%s`", log_path);
  if (!S_ISREG (st.st_mode))
    return husk_error_kind (err, EINVAL, "container log `%s`: not a regular file", log_path);
  if (husk_read_fd (fd, &text, &len, log_path, err) < 0)
    return -1;
  path = xasprintf ("%s/%s", dir, CHECKPOINT_CONTAINER_LOG);
  return husk_write_file_atomic (path, text, len, 0600, err);
}

static int
dump_metadata (struct checkpoint_job *job, struct husk_error **err)
{
  const struct cri_container *c = job->c;
  const char *root = job->svc->cfg->root;
  cleanup_free char *bundle = containers_bundle_dir (root, c->id);
  cleanup_free char *spec = xasprintf ("%s/config.json", bundle);
  cleanup_free char *upper = xasprintf ("%s/containers/%s/upper", root, c->id);
  cleanup_free char *diff = xasprintf ("%s/%s", job->work, CHECKPOINT_ROOTFS_DIFF);
  cleanup_free char *deleted = NULL;
  cleanup_free char *config = NULL;
  struct checkpoint_meta meta = {
    .id = c->id,
    .name = c->name,
    .image = c->image_id,
    .image_ref = c->image_ref,
    .image_name = c->image,
    .runtime = job->rt->path,
    .created_ns = c->created_at,
    .checkpointed_ns = cri_now_ns (),
  };

  config = checkpoint_config_dump (&meta);
  if (write_text (job->work, CHECKPOINT_CONFIG_DUMP, config, err) < 0
      || copy_file (spec, job->work, CHECKPOINT_SPEC_DUMP, err) < 0
      || checkpoint_rootfs_diff (upper, diff, &deleted, err) < 0)
    return -1;
  if (strcmp (deleted, "[]") != 0 && write_text (job->work, CHECKPOINT_DELETED_FILES, deleted, err) < 0)
    return -1;
  /* The log is what kubectl logs showed; a container without one has none. */
  if (cri_nonempty (c->log_path) && access (c->log_path, R_OK) == 0)
    return copy_log (c->log_path, job->work, err);
  return 0;
}

/* A dump takes as long as the container's memory takes to write: the
 * request's timeout, else this, not the 60 s of other runtime calls. */
#define CHECKPOINT_DEFAULT_TIMEOUT_MS (300 * 1000)

/* `RUNTIME --root ROOT checkpoint --leave-running --image-path IMAGES ID`;
 * a failure carries the runtime's stderr in one line. */
static int
run_checkpoint (struct checkpoint_job *job, const char *images, int64_t timeout_ms, struct husk_error **err)
{
  cleanup_free const char **argv = cri_runtime_argv (
      job->rt, (const char *[]){ "checkpoint", "--leave-running", "--image-path", images, job->c->id, NULL },
      0);
  struct cri_child_run run = { .argv = (char *const *) argv, .timeout_ms = timeout_ms, .output_max = 65536 };
  int ret = 0;

  if (cri_child_run (&run, err) < 0)
    return -1;
  if (run.timed_out)
    ret = husk_error_kind (err, ETIMEDOUT, "%s checkpoint: timed out after %lld ms", job->rt->path,
                           (long long) timeout_ms);
  else if (!WIFEXITED (run.wait_status) || WEXITSTATUS (run.wait_status) != 0)
    {
      char *msg = run.out[1].data ?: run.out[0].data ?: "";
      size_t len = strlen (msg);
      while (len && msg[len - 1] == '\n')
        msg[--len] = '\0';
      ret = husk_error_make (err, 0, "%s checkpoint: %s", job->rt->path, len ? msg : "failed");
    }
  cri_child_run_clear (&run);
  return ret;
}

static int
checkpoint_steps (struct checkpoint_job *job, const Runtime__V1__CheckpointContainerRequest *req,
                  struct husk_error **err)
{
  cleanup_free char *images = NULL;

  if (check_request (req, err) < 0 || claim_container (job, req->container_id, err) < 0)
    return -1;
  {
    cleanup_free char *parent = work_parent (job->svc);
    if (husk_mkdir_p (parent, 0700, err) < 0)
      return -1;
    job->work = xasprintf ("%s/work-XXXXXX", parent);
  }
  if (mkdtemp (job->work) == NULL)
    {
      int saved = errno;
      free (job->work);
      job->work = NULL;
      return husk_error_make (err, saved, "checkpoint of %s: create a work dir under %s/checkpoints",
                              job->c->id, job->svc->cfg->root);
    }
  /* The archive's temp file now, named in WORK.target first: an
   * unwritable location is refused before criu runs, and a crash from
   * here on leaves nothing the start-up sweep cannot find. */
  job->tmp_file = xasprintf ("%s.tmp-%d", job->location, (int) getpid ());
  job->target = xasprintf ("%s.target", job->work);
  if (husk_write_file_atomic (job->target, job->tmp_file, strlen (job->tmp_file), 0600, err) < 0)
    return -1;
  {
    int fd = open (job->tmp_file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
      {
        int saved = errno;
        free (job->tmp_file);
        job->tmp_file = NULL; /* not ours to remove */
        return husk_error_make (err, saved, "location `%s`: create the archive beside it", job->location);
      }
    close (fd);
  }
  images = xasprintf ("%s/%s", job->work, CHECKPOINT_DIR);
  if (run_checkpoint (job, images, req->timeout > 0 ? req->timeout * 1000 : CHECKPOINT_DEFAULT_TIMEOUT_MS,
                      err)
      < 0)
    return husk_error_wrap (err, "checkpoint container %s", job->c->id);
  if (dump_metadata (job, err) < 0)
    return -1;
  if (checkpoint_tar_dir (job->work, job->tmp_file, err) < 0)
    return -1;
  if (rename (job->tmp_file, job->location) < 0)
    return husk_error_make (err, errno, "rename `%s` to `%s`", job->tmp_file, job->location);
  return 0;
}

static int
checkpoint_container (struct cri_service *svc, const Runtime__V1__CheckpointContainerRequest *req,
                      struct husk_error **err)
{
  struct checkpoint_job job = { .svc = svc, .location = req->location };
  struct husk_error *ignored = NULL;
  int ret = checkpoint_steps (&job, req, err);

  if (job.work && husk_rm_rf (job.work, &ignored) < 0)
    {
      husk_warn ("%s", ignored->msg);
      husk_error_free (&ignored);
    }
  if (ret < 0 && job.tmp_file)
    unlink (job.tmp_file);
  if (job.target)
    unlink (job.target);
  free (job.target);
  free (job.work);
  free (job.tmp_file);
  cri_container_free (job.c);
  return ret;
}

/* A .target file of the sweep: the archive's temp file it names goes,
 * when it is one (LOCATION.tmp-PID). */
static void
sweep_target (const char *path)
{
  cleanup_free char *tmp_file = NULL;
  const char *tail;

  if (husk_read_file (path, &tmp_file, NULL, NULL) == 0 && tmp_file[0] == '/'
      && (tail = strrchr (tmp_file, '.')) != NULL && strncmp (tail, ".tmp-", 5) == 0
      && strspn (tail + 5, "0123456789") == strlen (tail + 5) && unlink (tmp_file) == 0)
    husk_warn ("checkpoint cut short: removed its partial archive `%s`", tmp_file);
}

void
cri_checkpoint_sweep (struct cri_service *svc)
{
  cleanup_free char *parent = work_parent (svc);
  cleanup_dir DIR *dir = opendir (parent);
  struct husk_error *err = NULL;
  struct dirent *de;

  while (dir && (de = readdir (dir)) != NULL)
    {
      cleanup_free char *path = xasprintf ("%s/%s", parent, de->d_name);
      size_t len = strlen (de->d_name);

      if (strncmp (de->d_name, "work-", 5) != 0)
        continue;
      if (len > 7 && strcmp (de->d_name + len - 7, ".target") == 0)
        {
          sweep_target (path);
          unlink (path);
        }
      else if (husk_rm_rf (path, &err) < 0)
        {
          husk_warn ("%s", err->msg);
          husk_error_free (&err);
        }
      else
        husk_warn ("checkpoint cut short: removed its work dir `%s`", path);
    }
}

void
cri_checkpoint_container (struct rpc_call *call, const void *req_bytes, size_t len, void *user)
{
  struct cri_service *svc = user;
  Runtime__V1__CheckpointContainerRequest *req
      = cri_unpack (call, &runtime__v1__checkpoint_container_request__descriptor, req_bytes, len);
  Runtime__V1__CheckpointContainerResponse resp = RUNTIME__V1__CHECKPOINT_CONTAINER_RESPONSE__INIT;
  struct husk_error *err = NULL;

  if (req == NULL)
    return;
  if (checkpoint_container (svc, req, &err) < 0)
    cri_fail (call, &err);
  else
    cri_reply (call, &resp.base);
  runtime__v1__checkpoint_container_request__free_unpacked (req, NULL);
}

/* The CRI ImageService over the image library: ListImages, ImageStatus,
 * PullImage, RemoveImage, ImageFsInfo. */
#include <errno.h>
#include <ftw.h>
#include <openssl/evp.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cri/server/service.h"
#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/auth_file.h"
#include "image/images.h"
#include "image/pull.h"
#include "image/reference.h"

/* One CRI Image and the storage its fields point into. */
struct image_view
{
  Runtime__V1__Image image;
  Runtime__V1__ImageSpec spec;
  Runtime__V1__Int64Value uid;
  char *username;
};

/* The image's default user: a uid when numeric ("1000" or "1000:1000"),
 * otherwise a name kubelet resolves with the pod's MustRunAsNonRoot rules. */
static void
view_user (struct image_view *view, const char *user)
{
  cleanup_free char *name = xstrdup (user ? user : "");
  char *colon = strchr (name, ':');
  long long uid;

  if (colon)
    *colon = '\0';
  if (*name == '\0')
    return;
  if (husk_parse_int64 (name, 0, UINT32_MAX, &uid) == 0)
    {
      runtime__v1__int64_value__init (&view->uid);
      view->uid.value = uid;
      view->image.uid = &view->uid;
      return;
    }
  view->username = steal_pointer (&name);
  view->image.username = view->username;
}

static void
view_init (struct image_view *view, const struct image *img)
{
  memset (view, 0, sizeof *view);
  runtime__v1__image__init (&view->image);
  runtime__v1__image_spec__init (&view->spec);
  view->image.id = img->id;
  view->image.n_repo_tags = husk_strv_len (img->repo_tags);
  view->image.repo_tags = img->repo_tags;
  view->image.n_repo_digests = husk_strv_len (img->repo_digests);
  view->image.repo_digests = img->repo_digests;
  view->image.size = img->size > 0 ? (uint64_t) img->size : 0;
  view->spec.image = img->id;
  view->image.spec = &view->spec;
  view_user (view, img->config.user);
}

static void
view_clear (struct image_view *view)
{
  free (view->username);
}

static const char *
spec_image (const Runtime__V1__ImageSpec *spec)
{
  return spec && spec->image && *spec->image ? spec->image : NULL;
}

void
cri_list_images (struct rpc_call *call, const void *req, size_t len, void *user)
{
  struct cri_service *svc = user;
  Runtime__V1__ListImagesRequest *request
      = cri_unpack (call, &runtime__v1__list_images_request__descriptor, req, len);
  Runtime__V1__ListImagesResponse reply = RUNTIME__V1__LIST_IMAGES_RESPONSE__INIT;
  const char *filter = request && request->filter ? spec_image (request->filter->image) : NULL;
  struct husk_error *err = NULL;
  struct image **images = NULL;
  size_t n = 0, kept = 0;

  if (request == NULL)
    return;
  if (filter)
    {
      struct image *one = NULL;
      if (images_lookup (store_root (svc->store), filter, &one, &err) == 0)
        {
          images = xcalloc (1, sizeof *images);
          images[0] = one;
          n = 1;
        }
      husk_error_free (&err);
    }
  else if (images_list (store_root (svc->store), &images, &n, &err) < 0)
    {
      rpc_fail (call, GRPC_STATUS_UNKNOWN, "ListImages: %s", err->msg);
      husk_error_free (&err);
      protobuf_c_message_free_unpacked (&request->base, NULL);
      return;
    }
  {
    cleanup_free struct image_view *views = xcalloc (n + 1, sizeof *views);
    cleanup_free Runtime__V1__Image **ptrs = xcalloc (n + 1, sizeof *ptrs);

    for (size_t i = 0; i < n; i++)
      {
        view_init (&views[i], images[i]);
        ptrs[kept++] = &views[i].image;
      }
    reply.n_images = kept;
    reply.images = ptrs;
    cri_reply (call, &reply.base);
    for (size_t i = 0; i < n; i++)
      view_clear (&views[i]);
  }
  images_free (images, n);
  protobuf_c_message_free_unpacked (&request->base, NULL);
}

/* verbose: under "info" as containerd has it, the chain ID of the top
 * layer and the whole image config ("imageSpec", read from the store and
 * checked against its digest), with husk's manifest digest and id. */
static char *
image_info_json (struct store *store, const struct image *img)
{
  cleanup_free char *config_text = NULL;
  struct husk_error *err = NULL;
  json_t *config = NULL, *doc;
  size_t config_len = 0;
  char *text;

  if (store_read_blob (store, img->id, 16 << 20, &config_text, &config_len, &err) == 0)
    config = json_loadb (config_text, config_len, 0, NULL);
  doc = json_pack ("{s:s, s:s, s:s?, s:s?, s:o}", "imageId", img->id, "manifestDigest", img->manifest_digest,
                   "mediaType", img->media_type, "chainID",
                   img->n_layers ? img->layers[img->n_layers - 1].chain_id : NULL, "imageSpec",
                   config ? config : json_null ());
  if (err)
    json_object_set_new (doc, "error", json_string (err->msg));
  husk_error_free (&err);
  text = json_dumps (doc, JSON_COMPACT);
  json_decref (doc);
  return text;
}

void
cri_image_status (struct rpc_call *call, const void *req, size_t len, void *user)
{
  struct cri_service *svc = user;
  Runtime__V1__ImageStatusRequest *request
      = cri_unpack (call, &runtime__v1__image_status_request__descriptor, req, len);
  Runtime__V1__ImageStatusResponse reply = RUNTIME__V1__IMAGE_STATUS_RESPONSE__INIT;
  Runtime__V1__ImageStatusResponse__InfoEntry entry = RUNTIME__V1__IMAGE_STATUS_RESPONSE__INFO_ENTRY__INIT;
  Runtime__V1__ImageStatusResponse__InfoEntry *entries[] = { &entry };
  cleanup_free char *info = NULL;
  struct image_view view = { 0 };
  struct image *img = NULL;
  struct husk_error *err = NULL;
  const char *name;

  if (request == NULL)
    return;
  name = spec_image (request->image);
  if (name == NULL)
    {
      rpc_fail (call, GRPC_STATUS_INVALID_ARGUMENT, "ImageStatus: image.image is required");
      protobuf_c_message_free_unpacked (&request->base, NULL);
      return;
    }
  /* A missing image is an empty reply, not an error (CRI contract). */
  if (images_lookup (store_root (svc->store), name, &img, &err) == 0)
    {
      view_init (&view, img);
      reply.image = &view.image;
      if (request->verbose)
        {
          info = image_info_json (svc->store, img);
          entry.key = "info";
          entry.value = info;
          reply.n_info = 1;
          reply.info = entries;
        }
    }
  husk_error_free (&err);
  cri_reply (call, &reply.base);
  view_clear (&view);
  image_free (img);
  protobuf_c_message_free_unpacked (&request->base, NULL);
}

/* Decodes base64 TEXT into OUT (strlen(TEXT) bytes at least). */
static int
base64_decode (const char *text, char *out)
{
  size_t in = strlen (text);
  int n = EVP_DecodeBlock ((unsigned char *) out, (const unsigned char *) text, (int) in);

  if (n < 0)
    return -1;
  /* EVP_DecodeBlock counts the padding as zero bytes. */
  while (in > 0 && text[in - 1] == '=' && n > 0)
    {
      in--;
      n--;
    }
  out[n] = '\0';
  return n;
}

/* AuthConfig: username/password, or auth = base64("user:pass"). */
static int
add_auth (struct registry_client *client, const char *host, const Runtime__V1__AuthConfig *auth,
          struct husk_error **err)
{
  cleanup_free char *decoded = NULL;
  const char *user = auth->username, *pass = auth->password;

  if ((user == NULL || *user == '\0') && auth->auth && *auth->auth)
    {
      size_t in = strlen (auth->auth);
      decoded = xcalloc (in + 1, 1);
      if (base64_decode (auth->auth, decoded) < 0 || strchr (decoded, ':') == NULL)
        return husk_error_kind (err, EINVAL, "PullImage: auth.auth: not base64 of user:password");
      *strchr (decoded, ':') = '\0';
      user = decoded;
      pass = decoded + strlen (decoded) + 1;
    }
  if (user && *user)
    registry_client_add_credentials (client, host, user, pass ? pass : "");
  return 0;
}

static bool
pull_cancelled (void *call)
{
  return rpc_call_cancelled (call);
}

/* The layer bytes a pull downloads, for husk_image_pull_bytes_total:
 * progress reports each layer's running total, so the growth of each. */
struct pull_bytes
{
  pthread_mutex_t lock;
  uint64_t *layer_done;
  size_t n_layers;
  uint64_t total;
};

static void
count_pull_bytes (const struct pull_progress *progress, void *user)
{
  struct pull_bytes *bytes = user;

  if (progress->phase != PULL_DOWNLOADING)
    return;
  pthread_mutex_lock (&bytes->lock);
  if (progress->index >= bytes->n_layers)
    {
      bytes->layer_done = xrealloc (bytes->layer_done, (progress->index + 1) * sizeof *bytes->layer_done);
      memset (bytes->layer_done + bytes->n_layers, 0,
              (progress->index + 1 - bytes->n_layers) * sizeof *bytes->layer_done);
      bytes->n_layers = progress->index + 1;
    }
  if (progress->done > bytes->layer_done[progress->index])
    {
      bytes->total += progress->done - bytes->layer_done[progress->index];
      bytes->layer_done[progress->index] = progress->done;
    }
  pthread_mutex_unlock (&bytes->lock);
}

/* The transfer stops once the client goes away (kubelet gave up) and when
 * it crawls below the configured rate; either frees the pull's worker. */
static int
pull (struct cri_service *svc, struct rpc_call *call, const Runtime__V1__PullImageRequest *request,
      struct image **img, struct pull_bytes *bytes, struct husk_error **err)
{
  const char *name = spec_image (request->image);
  struct pull_options pull_opts = { .max_image_bytes = svc->cfg->max_image_bytes,
                                    .progress = count_pull_bytes,
                                    .progress_user = bytes };
  struct registry_options opts;
  struct registry_client *client;
  struct reference *ref = NULL;
  int ret;

  if (name == NULL)
    return husk_error_kind (err, EINVAL, "PullImage: image.image is required");
  if (reference_parse (name, &ref, err) < 0)
    {
      (*err)->errnum = EINVAL;
      return -1;
    }
  registry_options_init (&opts);
  opts.hosts = svc->hosts;
  opts.stall_timeout_s = (unsigned) svc->cfg->pull_stall_timeout_s;
  opts.low_speed_bytes = (unsigned) svc->cfg->pull_min_bytes_per_s;
  opts.cancelled = pull_cancelled;
  opts.cancelled_user = call;
  opts.credentials = auth_file_credentials; /* when kubelet passes no auth: what `husk image login` wrote */
  client = registry_client_new (&opts);
  ret = request->auth ? add_auth (client, ref->domain, request->auth, err) : 0;
  if (ret == 0)
    ret = image_pull (svc->store, client, name, &pull_opts, img, err);
  registry_client_free (client);
  reference_free (ref);
  return ret;
}

void
cri_pull_image (struct rpc_call *call, const void *req, size_t len, void *user)
{
  struct cri_service *svc = user;
  Runtime__V1__PullImageRequest *request
      = cri_unpack (call, &runtime__v1__pull_image_request__descriptor, req, len);
  Runtime__V1__PullImageResponse reply = RUNTIME__V1__PULL_IMAGE_RESPONSE__INIT;
  struct husk_error *err = NULL;
  struct image *img = NULL;

  struct pull_bytes bytes = { .lock = PTHREAD_MUTEX_INITIALIZER };
  bool pulled;

  if (request == NULL)
    return;
  pulled = pull (svc, call, request, &img, &bytes, &err) == 0;
  cri_metrics_pull (svc, pulled, bytes.total);
  free (bytes.layer_done);
  if (!pulled)
    rpc_fail (call, cri_status_of (err), "%s", err->msg);
  else
    {
      reply.image_ref = img->id;
      cri_reply (call, &reply.base);
    }
  husk_error_free (&err);
  image_free (img);
  protobuf_c_message_free_unpacked (&request->base, NULL);
}

void
cri_remove_image (struct rpc_call *call, const void *req, size_t len, void *user)
{
  struct cri_service *svc = user;
  Runtime__V1__RemoveImageRequest *request
      = cri_unpack (call, &runtime__v1__remove_image_request__descriptor, req, len);
  Runtime__V1__RemoveImageResponse reply = RUNTIME__V1__REMOVE_IMAGE_RESPONSE__INIT;
  struct husk_error *err = NULL;
  const char *name;

  if (request == NULL)
    return;
  name = spec_image (request->image);
  if (name == NULL)
    rpc_fail (call, GRPC_STATUS_INVALID_ARGUMENT, "RemoveImage: image.image is required");
  /* Every tag goes, and a missing image is success (CRI contract). */
  else if (images_remove (svc->store, name, IMAGES_REMOVE_ALL_TAGS, NULL, &err) < 0 && err->errnum != ENOENT)
    rpc_fail (call, cri_status_of (err), "RemoveImage: %s", err->msg);
  else
    cri_reply (call, &reply.base);
  husk_error_free (&err);
  protobuf_c_message_free_unpacked (&request->base, NULL);
}

struct du
{
  uint64_t bytes, inodes;
};

static __thread struct du *du_acc;

static int
du_visit (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  du_acc->bytes += (uint64_t) st->st_blocks * 512;
  du_acc->inodes++;
  return 0;
}

static struct du
disk_usage (const char *dir)
{
  struct du acc = { 0 };

  du_acc = &acc;
  nftw (dir, du_visit, 64, FTW_PHYS | FTW_MOUNT);
  du_acc = NULL;
  return acc;
}

static void
fill_usage (Runtime__V1__FilesystemUsage *usage, Runtime__V1__FilesystemIdentifier *id,
            Runtime__V1__UInt64Value *bytes, Runtime__V1__UInt64Value *inodes, const char *dir)
{
  struct du du = disk_usage (dir);
  struct timespec now;

  clock_gettime (CLOCK_REALTIME, &now);
  runtime__v1__filesystem_usage__init (usage);
  runtime__v1__filesystem_identifier__init (id);
  runtime__v1__uint64_value__init (bytes);
  runtime__v1__uint64_value__init (inodes);
  id->mountpoint = (char *) dir;
  bytes->value = du.bytes;
  inodes->value = du.inodes;
  usage->timestamp = (int64_t) now.tv_sec * 1000000000 + now.tv_nsec;
  usage->fs_id = id;
  usage->used_bytes = bytes;
  usage->inodes_used = inodes;
}

void
cri_image_fs_info (struct rpc_call *call, const void *req, size_t len, void *user)
{
  struct cri_service *svc = user;
  Runtime__V1__ImageFsInfoRequest *request
      = cri_unpack (call, &runtime__v1__image_fs_info_request__descriptor, req, len);
  Runtime__V1__ImageFsInfoResponse reply = RUNTIME__V1__IMAGE_FS_INFO_RESPONSE__INIT;
  Runtime__V1__FilesystemUsage images_usage, containers_usage;
  Runtime__V1__FilesystemIdentifier images_id, containers_id;
  Runtime__V1__UInt64Value values[4];
  Runtime__V1__FilesystemUsage *images_list[] = { &images_usage };
  Runtime__V1__FilesystemUsage *containers_list[] = { &containers_usage };
  cleanup_free char *snapshots = xasprintf ("%s/snapshots", store_root (svc->store));
  cleanup_free char *containers = xasprintf ("%s/containers", store_root (svc->store));

  if (request == NULL)
    return;
  fill_usage (&images_usage, &images_id, &values[0], &values[1], snapshots);
  fill_usage (&containers_usage, &containers_id, &values[2], &values[3], containers);
  reply.n_image_filesystems = 1;
  reply.image_filesystems = images_list;
  reply.n_container_filesystems = 1;
  reply.container_filesystems = containers_list;
  cri_reply (call, &reply.base);
  protobuf_c_message_free_unpacked (&request->base, NULL);
}

/* A container created from a checkpoint archive (CreateContainer's image
 * names one, as CRI-O does): where its archive is unpacked, its rootfs
 * diff and deleted files applied, and the CRIU images the monitor's
 * `restore` reads.  Under the handlers: CreateContainer uses it. */
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cri/container/checkpoint_archive.h"
#include "cri/server/service.h"
#include "husk/cleanup.h"
#include "husk/util.h"

bool
cri_is_checkpoint_archive (const char *image)
{
  struct stat st;

  return image && image[0] == '/' && stat (image, &st) == 0 && S_ISREG (st.st_mode);
}

char *
cri_restore_dir (struct cri_service *svc, const char *id)
{
  return xasprintf ("%s/containers/%s/restore", svc->cfg->root, id);
}

/* After the bundle of a container from ARCHIVE is made: its contents go
 * to ROOT/containers/<id>/restore (CRIU's images for the monitor's
 * `restore`), its rootfs diff onto the fresh rootfs, its deleted files
 * out of it. */
int
cri_restore_prepare (struct cri_service *svc, const char *id, const char *archive, struct husk_error **err)
{
  cleanup_free char *dir = cri_restore_dir (svc, id);
  cleanup_free char *rootfs = xasprintf ("%s/containers/%s/merged", svc->cfg->root, id);
  cleanup_free char *diff = xasprintf ("%s/%s", dir, CHECKPOINT_ROOTFS_DIFF);
  cleanup_free char *deleted = xasprintf ("%s/%s", dir, CHECKPOINT_DELETED_FILES);
  cleanup_free char *text = NULL;
  size_t len = 0;

  if (mkdir (dir, 0700) < 0)
    return husk_error_make (err, errno, "mkdir `%s`", dir);
  if (checkpoint_extract (archive, dir, true, err) < 0)
    return husk_error_wrap (err, "restore from checkpoint archive `%s`", archive);
  if (access (diff, F_OK) == 0 && checkpoint_extract (diff, rootfs, false, err) < 0)
    return husk_error_wrap (err, "restore the rootfs diff of `%s`", archive);
  if (access (deleted, F_OK) == 0
      && (husk_read_file (deleted, &text, &len, err) < 0 || checkpoint_apply_deleted (rootfs, text, err) < 0))
    return husk_error_wrap (err, "restore from checkpoint archive `%s`", archive);
  return 0;
}

/* The CRIU image dir of a container being restored, or NULL. */
char *
cri_restore_images (struct cri_service *svc, const char *id)
{
  cleanup_free char *dir = cri_restore_dir (svc, id);
  char *images = xasprintf ("%s/%s", dir, CHECKPOINT_DIR);

  if (access (images, F_OK) == 0)
    return images;
  free (images);
  return NULL;
}

/* The container checkpoint archive CRI-O writes and checkpointctl reads:
 * one uncompressed tar holding checkpoint/ (CRIU's images), config.dump
 * (who the container was), spec.dump (its OCI config), rootfs-diff.tar
 * (the files its writable layer changed) and deleted.files (those it
 * removed, as a JSON list).  No CRI types here: the service fills the
 * metadata in. */
#ifndef HUSK_CRI_CHECKPOINT_ARCHIVE_H
#define HUSK_CRI_CHECKPOINT_ARCHIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "husk/error.h"

#define CHECKPOINT_DIR "checkpoint"
#define CHECKPOINT_CONFIG_DUMP "config.dump"
#define CHECKPOINT_SPEC_DUMP "spec.dump"
#define CHECKPOINT_ROOTFS_DIFF "rootfs-diff.tar"
#define CHECKPOINT_DELETED_FILES "deleted.files"
#define CHECKPOINT_CONTAINER_LOG "container.log"

/* config.dump's fields (checkpointctl's ContainerConfig). */
struct checkpoint_meta
{
  const char *id;
  const char *name;
  const char *image;      /* rootfsImage: the image id */
  const char *image_ref;  /* rootfsImageRef */
  const char *image_name; /* rootfsImageName: as kubelet named it */
  const char *runtime;    /* the OCI runtime's path */
  int64_t created_ns;     /* unix nanoseconds */
  int64_t checkpointed_ns;
};

/* config.dump's JSON text (newly allocated). */
char *checkpoint_config_dump (const struct checkpoint_meta *meta);
/* Reads back config.dump's id, name and rootfsImageName (newly allocated
 * into META's fields, which the caller frees). */
int checkpoint_config_parse (const char *text, const char *file_name, char **id, char **name,
                             char **image_name, struct husk_error **err);

/* An RFC 3339 UTC time with nanoseconds for unix nanoseconds NS. */
char *checkpoint_time_text (int64_t ns);

/* Writes UPPER (an overlay upper dir) as the tar OUT_TAR, leaving out the
 * whiteouts (0:0 character devices), whose paths go to *DELETED_JSON as a
 * JSON list ("[]" when none).  A missing UPPER is an empty diff. */
int checkpoint_rootfs_diff (const char *upper, const char *out_tar, char **deleted_json,
                            struct husk_error **err);

/* Writes the contents of DIR (paths relative to it) as the tar OUT. */
int checkpoint_tar_dir (const char *dir, const char *out, struct husk_error **err);

/* What a checkpoint archive says about itself (checkpoint_archive_read). */
struct checkpoint_archive_info
{
  char *id, *name, *image_name; /* from config.dump */
  bool has_spec, has_images, has_rootfs_diff;
};

/* Reads the archive PATH's table of contents and config.dump: an error
 * names the file and what is wrong (not a tar, no config.dump, no
 * checkpoint/ or spec.dump). */
int checkpoint_archive_read (const char *path, struct checkpoint_archive_info *info, struct husk_error **err);
void checkpoint_archive_info_clear (struct checkpoint_archive_info *info);

/* Extracts the tar PATH into DEST (which exists): no absolute paths, no
 * "..", no writing through symlinks; owners and modes kept.  TOP_LEVEL
 * (the checkpoint archive itself, not its rootfs diff): a member that is
 * not a regular file or a directory is refused, naming it. */
int checkpoint_extract (const char *path, const char *dest, bool top_level, struct husk_error **err);
/* Removes from ROOTFS the paths of deleted.files' JSON text (relative;
 * one with ".." is refused), each resolved inside ROOTFS (a symlink on
 * the way leads where it leads in the container, never out of it; the
 * last component is removed, never followed). */
int checkpoint_apply_deleted (const char *rootfs, const char *deleted_json, struct husk_error **err);

#endif

/* Sizes, ages and names as podman prints them in its tables. */
#ifndef HUSK_IMAGE_HUMAN_H
#define HUSK_IMAGE_HUMAN_H

#include <stddef.h>
#include <stdint.h>

/* "35.1 MB", "980 B", "4.27 GB": three significant digits, SI units. */
void human_size (uint64_t bytes, char *buf, size_t size);
/* "3 days ago", "About an hour ago", as docker's HumanDuration words it. */
void human_ago (long long seconds, char *buf, size_t size);
/* "2024-01-02T03:04:05.123Z" or "...+01:00" -> unix seconds; -1 if not. */
int parse_rfc3339 (const char *text, long long *out);
/* "reg:5000/x/y:tag" -> "reg:5000/x/y" and "tag"; "x@sha256:..." and a
 * name without a tag give "<none>" as the tag.  Both malloc'd. */
void split_repo_tag (const char *name, char **repository, char **tag);

#endif

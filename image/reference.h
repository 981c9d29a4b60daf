/* Image references ("busybox", "127.0.0.1:5000/x/y:tag", "name@sha256:…"),
 * parsed and normalised as docker and containerd do, so a name means the
 * same image in husk as in the tools people already use. */
#ifndef HUSK_IMAGE_REFERENCE_H
#define HUSK_IMAGE_REFERENCE_H

#include <stdbool.h>

#include "husk/error.h"

#define REFERENCE_DEFAULT_DOMAIN "docker.io"
#define REFERENCE_DEFAULT_TAG "latest"
/* Longest "domain/path" the distribution grammar allows. */
#define REFERENCE_NAME_MAX 255
#define REFERENCE_TAG_MAX 128

struct reference
{
  char *domain; /* "docker.io", "127.0.0.1:5000", "[::1]:5000" */
  char *path;   /* repository without the domain: "library/busybox" */
  char *tag;    /* NULL if none; "latest" when neither tag nor digest was given */
  char *digest; /* NULL if none; a valid "sha256:<hex>" otherwise */
};

/* Parses TEXT.  Errors are one line: `invalid reference "TEXT": why`. */
int reference_parse (const char *text, struct reference **out, struct husk_error **err);
void reference_free (struct reference *ref);
struct reference *reference_dup (const struct reference *ref);

/* "domain/path" */
char *reference_repository (const struct reference *ref);
/* Canonical: "domain/path:tag", "domain/path@digest" or "domain/path:tag@digest". */
char *reference_string (const struct reference *ref);
/* Short form people type: "busybox:latest", "foo/bar:1", "127.0.0.1:5000/x:y". */
char *reference_familiar (const struct reference *ref);

/* True when S is a registry host as the grammar allows it: "host",
 * "host:port", "a.b.c", "[v6addr]:port". */
bool reference_domain_is_valid (const char *s);

#endif

/* A pod's traffic shaping, as kubelet asks for it: the annotations
 * kubernetes.io/ingress-bandwidth and kubernetes.io/egress-bandwidth hold
 * Kubernetes quantities in bits per second ("10M", "1Gi", "500k"), handed
 * to CNI's bandwidth capability with an unlimited burst, as containerd
 * does. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cri/pod/sandbox_internal.h"

#define INGRESS_ANNOTATION "kubernetes.io/ingress-bandwidth"
#define EGRESS_ANNOTATION "kubernetes.io/egress-bandwidth"
/* kubelet's own bounds for these annotations: 1 kbit/s to 1 Pbit/s. */
#define RATE_MIN 1e3
#define RATE_MAX 1e15

static const struct
{
  const char *suffix;
  double factor;
} suffixes[] = {
  { "Ki", 0x1p10 }, { "Mi", 0x1p20 }, { "Gi", 0x1p30 }, { "Ti", 0x1p40 }, { "Pi", 0x1p50 },
  { "Ei", 0x1p60 }, { "k", 1e3 },     { "M", 1e6 },     { "G", 1e9 },     { "T", 1e12 },
  { "P", 1e15 },    { "E", 1e18 },    { "m", 1e-3 },    { "", 1 },
};

int
sandbox_parse_quantity (const char *text, double *value)
{
  /* Decimal digits with an optional fraction, then a suffix: no sign,
   * exponent, hex, "inf" or blanks, which strtod alone would take. */
  size_t digits = text ? strspn (text, "0123456789") : 0;
  size_t len = digits;

  if (digits == 0)
    return -1;
  if (text[len] == '.')
    {
      size_t fraction = strspn (text + len + 1, "0123456789");
      if (fraction == 0)
        return -1;
      len += 1 + fraction;
    }
  for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++)
    if (strcmp (text + len, suffixes[i].suffix) == 0)
      {
        *value = strtod (text, NULL) * suffixes[i].factor;
        return isfinite (*value) ? 0 : -1;
      }
  return -1;
}

static int
rate_of (const char *annotation, const char *text, uint64_t *rate, struct husk_error **err)
{
  double value;

  if (sandbox_parse_quantity (text, &value) < 0)
    return husk_error_kind (err, EINVAL, "config.annotations[%s] `%s`: not a quantity (like 10M or 1Gi)",
                            annotation, text);
  if (value < RATE_MIN || value > RATE_MAX)
    return husk_error_kind (err, EINVAL, "config.annotations[%s] `%s`: must be between 1k and 1P bits/s",
                            annotation, text);
  *rate = (uint64_t) ceil (value);
  return 0;
}

int
sandbox_bandwidth (const Runtime__V1__PodSandboxConfig *config, struct cni_bandwidth *out, bool *limited,
                   struct husk_error **err)
{
  *limited = false;
  memset (out, 0, sizeof *out);
  /* protobuf-c keeps duplicate map keys: the last one wins. */
  for (size_t i = 0; i < config->n_annotations; i++)
    {
      const char *key = config->annotations[i]->key, *value = config->annotations[i]->value;
      bool ingress = strcmp (key, INGRESS_ANNOTATION) == 0;

      if (!ingress && strcmp (key, EGRESS_ANNOTATION) != 0)
        continue;
      if (rate_of (key, value, ingress ? &out->ingress_rate : &out->egress_rate, err) < 0)
        return -1;
      *(ingress ? &out->ingress_burst : &out->egress_burst) = UINT32_MAX;
      *limited = true;
    }
  return 0;
}

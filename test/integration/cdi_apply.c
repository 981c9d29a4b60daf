/* Test helper for test_cdi_generate.sh: applies CDI devices to a bundle's
 * config.json through husk's own registry and cdi_apply, as huskd and
 * `husk container run` do.
 *
 *   cdi_apply SPEC_DIR CONFIG_JSON NAME...
 */
#include <stdio.h>
#include <string.h>

#include "cri/cdi/cdi.h"

int
main (int argc, char **argv)
{
  const char *dirs[] = { NULL, NULL };
  struct husk_error *err = NULL;
  struct cdi_registry *reg;
  json_error_t jerr;
  json_t *config;
  int ret = 0;

  if (argc < 4)
    {
      fprintf (stderr, "usage: cdi_apply SPEC_DIR CONFIG_JSON NAME...\n");
      return 2;
    }
  dirs[0] = argv[1];
  config = json_load_file (argv[2], 0, &jerr);
  if (config == NULL)
    {
      fprintf (stderr, "cdi_apply: %s:%d: %s\n", argv[2], jerr.line, jerr.text);
      return 1;
    }
  reg = cdi_registry_new (dirs);
  if (reg == NULL || cdi_apply (reg, config, (const char *const *) argv + 3, &err) < 0)
    {
      fprintf (stderr, "cdi_apply: %s\n", err ? err->msg : "out of memory");
      ret = 1;
    }
  else if (json_dump_file (config, argv[2], JSON_INDENT (2)) < 0)
    {
      fprintf (stderr, "cdi_apply: write %s\n", argv[2]);
      ret = 1;
    }
  cdi_registry_free (reg);
  json_decref (config);
  return ret;
}

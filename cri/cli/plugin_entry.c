/* main() of husk-image and husk-hook: husk executes them as
 * `PLUGIN RUNTIME_ROOT GROUP VERB ...` (see husk/plugin.h). */
#include <stdio.h>
#include <string.h>

#include "husk/asan_options.h"
#include "husk/plugin.h"

int
main (int argc, char **argv)
{
  if (argc < 3 || argv[1][0] == '\0')
    {
      fprintf (stderr, "%s: run by husk as `%s RUNTIME_ROOT GROUP VERB ...`; use `husk GROUP ...`\n",
               argv[0] ? argv[0] : "husk-plugin", argv[0] ? argv[0] : "husk-plugin");
      return 125;
    }
  return husk_plugin_main (argv[2], argc - 2, argv + 2, argv[1], argv);
}

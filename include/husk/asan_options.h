/* Included by the main() file of each program that enters containers'
 * namespaces (husk, husk-image). */
#ifndef HUSK_ASAN_OPTIONS_H
#define HUSK_ASAN_OPTIONS_H

#ifdef __SANITIZE_ADDRESS__
/* `make sanitize`: LeakSanitizer's exit-time scan stops the world through
 * /proc/self, which a process that joined a container's namespaces (exec,
 * the init before its execve) does not see as its own: it spins forever.
 * The runtime's short-lived processes run without it; its library code is
 * leak-checked by the unit tests.  ASAN_OPTIONS still overrides this. */
const char *__asan_default_options (void);
const char *
__asan_default_options (void)
{
  return "detect_leaks=0";
}
#endif

#endif

/* Starting a helper program from a big, many-threaded process (huskd)
 * without fork's cost: the child shares the parent's memory until it
 * calls execve (clone with CLONE_VM | CLONE_VFORK, as posix_spawn does),
 * so no page tables are copied, no copy-on-write faults and TLB
 * shootdowns follow in the parent's other threads, and no copied address
 * space is torn down at exec.  A storm of pods forks 11 times per pod;
 * with fork that was most of huskd's own CPU time. */
#ifndef HUSK_SPAWN_H
#define HUSK_SPAWN_H

#include <signal.h>
#include <sys/types.h>

/* Runs CHILD (ARG) in a new process that shares this process's memory
 * and file descriptor numbers' targets (not the table: it has a copy)
 * and waits until it has called execve or _exit.  All signals are
 * blocked meanwhile, in this thread and at the child's start.  CHILD runs
 * on a stack of its own and may only make async-signal-safe calls, write
 * nothing but its own locals (and what ARG points to, by agreement), and
 * must end in execve or _exit; it calls husk_spawn_child_signals before
 * execve.  Returns the child's pid, or -1 with errno. */
pid_t husk_spawn (int (*child) (void *), void *arg);

/* Put on every CHILD function and what it calls that may _exit: AddressSanitizer cannot follow a process
 * that runs on a stack it did not see made (it warns "ignoring requested
 * __asan_handle_no_return" at CHILD's _exit or failing execve, and the
 * sanitizer run counts that as a report), so CHILD's own code is left
 * uninstrumented; what it calls still is. */
#define HUSK_SPAWN_CHILD __attribute__ ((no_sanitize_address))

/* In CHILD: every signal that has a handler back to SIG_DFL (ignored ones
 * stay ignored, as across execve), then MASK as the signal mask, so no
 * handler of the parent ever runs on the shared memory. */
void husk_spawn_child_signals (const sigset_t *mask);

#endif

/* Exec plans (exec.c) kept per container for a caller that execs into the
 * same containers again and again (huskd's ExecSync, `husk exec-helper`):
 * loaded once, reloaded when the init or state.json changes, dropped once
 * the init is gone. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/container.h"
#include "runtime/exec_plans.h"

/* Plans kept at most; past it a plan is used once and freed. */
#define PLANS_MAX 4096

struct exec_plan_ref
{
  char *root;
  char *id;
  struct exec_plan *plan;
  unsigned refs; /* calls using it, plus one while cached */
  struct exec_plan_ref *next;
};

static pthread_mutex_t plans_lock = PTHREAD_MUTEX_INITIALIZER;
static struct exec_plan_ref *plans;
static size_t n_plans;

static void
entry_unref_locked (struct exec_plan_ref *e)
{
  if (--e->refs > 0)
    return;
  container_exec_plan_free (e->plan);
  free (e->root);
  free (e->id);
  free (e);
}

void
exec_plans_release (struct exec_plan_ref *e)
{
  pthread_mutex_lock (&plans_lock);
  entry_unref_locked (e);
  pthread_mutex_unlock (&plans_lock);
}

/* Unlinks E from the cache (which drops the cache's reference). */
static void
unlink_locked (struct exec_plan_ref **link)
{
  struct exec_plan_ref *e = *link;

  *link = e->next;
  n_plans--;
  entry_unref_locked (e);
}

/* Drops the plans of containers whose init is gone. */
static void
sweep_locked (void)
{
  for (struct exec_plan_ref **link = &plans; *link;)
    if (!container_exec_plan_current ((*link)->plan))
      unlink_locked (link);
    else
      link = &(*link)->next;
}

/* A current plan from the cache, referenced; NULL when there is none. */
static struct exec_plan_ref *
cached (const char *root, const char *id)
{
  struct exec_plan_ref *found = NULL;

  pthread_mutex_lock (&plans_lock);
  for (struct exec_plan_ref **link = &plans; *link; link = &(*link)->next)
    if (strcmp ((*link)->id, id) == 0 && strcmp ((*link)->root, root) == 0)
      {
        if (container_exec_plan_current ((*link)->plan))
          {
            found = *link;
            found->refs++;
          }
        else
          unlink_locked (link);
        break;
      }
  pthread_mutex_unlock (&plans_lock);
  return found;
}

struct exec_plan_ref *
exec_plans_get (const char *root, const char *id, struct husk_error **err)
{
  struct runtime_ctx ctx = { .root = root };
  struct exec_plan_ref *e = cached (root, id);

  if (e)
    return e;
  e = xcalloc (1, sizeof *e);
  if (container_exec_plan_load (&ctx, id, &e->plan, err) < 0)
    {
      free (e);
      return NULL;
    }
  e->root = xstrdup (root);
  e->id = xstrdup (id);
  e->refs = 1;
  pthread_mutex_lock (&plans_lock);
  sweep_locked ();
  if (n_plans < PLANS_MAX)
    {
      e->refs++;
      e->next = plans;
      plans = e;
      n_plans++;
    }
  pthread_mutex_unlock (&plans_lock);
  return e;
}

bool
exec_plans_spawnable (const struct exec_plan_ref *e)
{
  return container_exec_plan_spawnable (e->plan);
}

pid_t
exec_plans_spawn (const struct exec_plan_ref *e, char *const *args, const int stdio[3], const char *pid_file,
                  struct husk_error **err)
{
  pid_t pid = container_exec_plan_spawn (e->plan, args, stdio, err);
  char buf[32];
  int n;

  if (pid < 0 || pid_file == NULL)
    return pid;
  n = snprintf (buf, sizeof buf, "%d", (int) pid);
  if (husk_write_file_replace (pid_file, buf, (size_t) n, 0644, err) < 0)
    {
      kill (pid, SIGKILL);
      while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
        ;
      return -1;
    }
  return pid;
}

/* `husk container`'s output as podman shows it, and its exit codes: pure
 * logic, unit tested (test/unit/test_cli_fmt.c). */
#ifndef HUSK_CRI_CLI_FMT_H
#define HUSK_CRI_CLI_FMT_H

#include <jansson.h>
#include <stdio.h>

#include "husk/error.h"

/* podman's (docker's): 125 husk itself failed (a bad option, an unknown
 * container, the runtime before the process ran), 126 the command is not
 * executable, 127 it is not found; otherwise the container's own code. */
enum
{
  CLI_EXIT_ERROR = 125,
  CLI_EXIT_NOT_EXECUTABLE = 126,
  CLI_EXIT_NOT_FOUND = 127,
};

/* The exit code for ERR (one the CLI could not go on from). */
int cli_exit_code (const struct husk_error *err);

/* go-units' HumanDuration: "Less than a second", "5 seconds", "About a
 * minute", "3 hours", "2 weeks", ... */
char *cli_human_duration (long long seconds);

/* podman's STATUS column for STATE (created, running, paused, exited;
 * anything else "Stopped"), SECONDS since it started (running) or
 * finished (exited). */
char *cli_status_text (const char *state, int exit_code, long long seconds);

/* TEMPLATE with each {{.Name}} replaced by FIELDS' member Name (a string
 * as it is, anything else as JSON); \t and \n written as escapes are made
 * real.  An unknown field is an error naming it. */
int cli_template_render (const char *template, json_t *fields, char **out, struct husk_error **err);

/* Rows of cells printed in aligned columns (tabwriter-like). */
struct cli_table
{
  size_t n_columns;
  size_t widths[16];
  char ***rows;
  size_t n_rows;
};

void cli_table_add (struct cli_table *table, const char *const *cells);
/* Prints and frees the rows. */
void cli_table_print (struct cli_table *table, FILE *out);

#endif

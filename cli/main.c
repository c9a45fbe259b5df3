/*
 * main.c: ci-ctl entry point: global options, then dispatch to a command.
 *
 * Global options may come before the command (parsed here) or after it
 * (each command's option table ends with CLI_COMMON_OPTIONS).  Parsing
 * here stops at the first operand, the command name, so a command's own
 * options are never mistaken for global ones.
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "client.h"

static const struct cli_cmd *const main_cmds[] = {
    &cmd_create,   &cmd_ls,        &cmd_show,    &cmd_rm,         &cmd_keepalive, &cmd_exec,
    &cmd_put,      &cmd_get,       &cmd_files,   &cmd_rmfile,     &cmd_health,    &cmd_gc,
    &cmd_drain,    &cmd_events,    &cmd_keys,    &cmd_version,    &cmd_audit,     &cmd_quota,
    &cmd_usage,    &cmd_run,       &cmd_runs,    &cmd_failures,   &cmd_reviews,   &cmd_install,
    &cmd_snapshot, &cmd_snapshots, &cmd_restore, &cmd_workspaces, &cmd_nodes,     &cmd_allow,
};

#define MAIN_NCMDS (sizeof(main_cmds) / sizeof(main_cmds[0]))

static const struct option main_options[] = {
    CLI_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
};

static void main_help(FILE *out)
{
	size_t i;

	fprintf(out,
		"usage: %s [--server URL] [--json] [--api-key KEY] [--cacert FILE] COMMAND "
		"[ARGS...]\n"
		"\n"
		"Drive ci-daemon: Python sandboxes that keep their state between executions.\n"
		"\n"
		"Commands:\n",
		CLI_PROG);
	for (i = 0; i < MAIN_NCMDS; i++)
		fprintf(out, "  %-11s %s\n", main_cmds[i]->name, main_cmds[i]->summary);
	fprintf(out,
		"\n"
		"Global options (before or after the command):\n"
		"  --server URL   daemon to talk to: http://HOST:PORT, https://HOST:PORT or\n"
		"                 unix:/PATH/TO.sock\n"
		"                 (default: $CICTL_SERVER, else %s)\n"
		"  --json         print the server's JSON answer as is, one document, for scripts\n"
		"  --api-key KEY  sent as 'Authorization: Bearer KEY' (default: $CICTL_API_KEY;\n"
		"                 prefer the variable: arguments show in ps)\n"
		"  --cacert FILE  CA certificate(s), PEM, that an https:// server's certificate\n"
		"                 must chain to (default: $CICTL_CACERT, else the system's)\n"
		"  -h, --help     this help; `%s COMMAND -h` for a command's\n"
		"  --version      print ci-ctl's version (`%s version`: the server's too)\n"
		"\n"
		"Exit status:\n"
		"  0  success\n"
		"  1  exec: the code raised an exception; health: the daemon is not ready;\n"
		"     other commands: a local failure (a file could not be read or written)\n"
		"  2  usage error\n"
		"  3  exec: the execution timed out\n"
		"  4  exec: the kernel died (out of memory, crash) and was restarted\n"
		"  5  API or transport error: the server answered an error, or could not be\n"
		"     reached\n",
		CLI_DEFAULT_SERVER, CLI_PROG, CLI_PROG);
}

static const struct cli_cmd *main_find(const char *name)
{
	size_t i;

	for (i = 0; i < MAIN_NCMDS; i++)
		if (strcmp(main_cmds[i]->name, name) == 0)
			return main_cmds[i];
	return NULL;
}

/* `ci-ctl help [COMMAND]` */
static int main_help_cmd(int argc, char **argv)
{
	const struct cli_cmd *cmd;

	if (argc < 2) {
		main_help(stdout);
		return CLI_EXIT_OK;
	}
	cmd = main_find(argv[1]);
	if (cmd == NULL) {
		fprintf(stderr, "%s: unknown command '%s' (see `%s --help`)\n", CLI_PROG, argv[1],
			CLI_PROG);
		return CLI_EXIT_USAGE;
	}
	cli_cmd_help(cmd, stdout);
	return CLI_EXIT_OK;
}

int main(int argc, char **argv)
{
	struct cli_ctx ctx;
	const struct cli_cmd *cmd;
	const char *env;
	int c, rc;

	memset(&ctx, 0, sizeof(ctx));
	env = getenv("CICTL_SERVER");
	ctx.server = env != NULL && *env != '\0' ? env : CLI_DEFAULT_SERVER;
	ctx.api_key = getenv("CICTL_API_KEY");
	ctx.cacert = getenv("CICTL_CACERT");

	opterr = 0;
	/* '+': stop at the command name instead of permuting past it. */
	while ((c = getopt_long(argc, argv, "+:h", main_options, NULL)) != -1) {
		switch (c) {
		case 'h': main_help(stdout); return CLI_EXIT_OK;
		case '?':
		case ':': {
			char problem[256];

			cli_option_problem(c, argv, problem, sizeof(problem));
			fprintf(stderr, "%s: %s (see --help)\n", CLI_PROG, problem);
			return CLI_EXIT_USAGE;
		}
		default:
			if (cli_global_option(&ctx, c, optarg) == CLI_GETOPT_STOP)
				return ctx.rc;
			break;
		}
	}
	if (optind >= argc) {
		main_help(stderr);
		return CLI_EXIT_USAGE;
	}
	if (strcmp(argv[optind], "help") == 0)
		return main_help_cmd(argc - optind, argv + optind);
	cmd = main_find(argv[optind]);
	if (cmd == NULL) {
		fprintf(stderr, "%s: unknown command '%s' (see `%s --help`)\n", CLI_PROG,
			argv[optind], CLI_PROG);
		return CLI_EXIT_USAGE;
	}

	ctx.cmd = cmd;
	rc = cmd->run(&ctx, argc - optind, argv + optind);
	client_free(ctx.client);
	for (size_t i = 0; i < ctx.nresolved; i++)
		free(ctx.resolved[i]);
	free(ctx.resolved);

	/* A full disk or closed pipe must not look like success. */
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "%s: writing output failed\n", CLI_PROG);
		if (rc == CLI_EXIT_OK)
			rc = CLI_EXIT_FAIL;
	}
	return rc;
}

/*
 * cli.h: what ci-ctl's command files share: the command descriptor, the
 * run context, option parsing with the global options mixed in, and
 * request helpers that report failures the same way everywhere.
 *
 * A command is one `const struct cli_cmd` exported from a cmd_*.c file and
 * listed in main.c's dispatch table (tmux's cmd-*.c shape).
 */
#ifndef CLI_CLI_H
#define CLI_CLI_H

#include <getopt.h>
#include <stdio.h>

#include "json.h"
#include "util.h"

struct buf;
struct err;

struct client;
struct client_req;
struct client_resp;

#define CLI_PROG "ci-ctl"
#define CLI_DEFAULT_SERVER "http://127.0.0.1:8080"

struct cli_cmd;

struct cli_ctx {
	const char *server;        /* --server, $CICTL_SERVER or the default */
	const char *api_key;       /* --api-key or $CICTL_API_KEY, may be NULL */
	const char *cacert;        /* --cacert or $CICTL_CACERT, may be NULL */
	int json;                  /* --json: print server documents as is */
	const struct cli_cmd *cmd; /* the command being run */
	struct client *client;     /* made on first use, freed by main */
	int getopt_started;
	int rc;          /* exit status after CLI_GETOPT_STOP */
	char **resolved; /* full ids cli_session_id put into argv; main frees */
	size_t nresolved;
	const char *output; /* -o FORMAT of ls and show: json, wide or name */
};

struct cli_cmd {
	const char *name;
	const char *usage;   /* arguments after the name, for "usage:" */
	const char *summary; /* one line for `ci-ctl --help` */
	const char *help;    /* option and detail text for `ci-ctl NAME -h` */
	/* argv[0] is the command name; returns the exit status. */
	int (*run)(struct cli_ctx *ctx, int argc, char **argv);
};

extern const struct cli_cmd cmd_create;
extern const struct cli_cmd cmd_ls;
extern const struct cli_cmd cmd_show;
extern const struct cli_cmd cmd_rm;
extern const struct cli_cmd cmd_keepalive;
extern const struct cli_cmd cmd_exec;
extern const struct cli_cmd cmd_put;
extern const struct cli_cmd cmd_get;
extern const struct cli_cmd cmd_files;
extern const struct cli_cmd cmd_rmfile;
extern const struct cli_cmd cmd_health;
extern const struct cli_cmd cmd_gc;
extern const struct cli_cmd cmd_drain;
extern const struct cli_cmd cmd_events;
extern const struct cli_cmd cmd_keys;
extern const struct cli_cmd cmd_version;
extern const struct cli_cmd cmd_audit;
extern const struct cli_cmd cmd_quota;
extern const struct cli_cmd cmd_usage;
extern const struct cli_cmd cmd_run;
extern const struct cli_cmd cmd_runs;
extern const struct cli_cmd cmd_failures;
extern const struct cli_cmd cmd_reviews;
extern const struct cli_cmd cmd_install;
extern const struct cli_cmd cmd_snapshot;
extern const struct cli_cmd cmd_snapshots;
extern const struct cli_cmd cmd_restore;
extern const struct cli_cmd cmd_workspaces;
extern const struct cli_cmd cmd_nodes;
extern const struct cli_cmd cmd_allow;

/* getopt values of the global options; above any short option char. */
enum {
	CLI_OPT_SERVER = 0x100,
	CLI_OPT_JSON,
	CLI_OPT_API_KEY,
	CLI_OPT_VERSION,
	CLI_OPT_CACERT,
	CLI_OPT_FIRST_COMMAND /* commands number their long-only options here */
};

/* Ends every command's long option table (before the zero entry), so the
 * global options work after the command name too. */
#define CLI_COMMON_OPTIONS                                                                         \
	{"server", required_argument, NULL, CLI_OPT_SERVER},                                       \
	    {"json", no_argument, NULL, CLI_OPT_JSON},                                             \
	    {"api-key", required_argument, NULL, CLI_OPT_API_KEY},                                 \
	    {"cacert", required_argument, NULL, CLI_OPT_CACERT}, {"help", no_argument, NULL, 'h'}, \
	{                                                                                          \
		"version", no_argument, NULL, CLI_OPT_VERSION                                      \
	}

/* Returned by cli_getopt when the command must return ctx->rc now. */
#define CLI_GETOPT_STOP (-2)

/*
 * getopt_long for commands: shortopts must start with ':' and contain 'h'.
 * Handles the global options, -h/--help (prints the command's help) and
 * option errors itself.  Returns the next command option, -1 when options
 * end (operands start at optind), or CLI_GETOPT_STOP.
 */
int cli_getopt(struct cli_ctx *ctx, int argc, char **argv, const char *shortopts,
	       const struct option *longopts);

/* Applies a global option; returns 1 if opt was one, else 0.  --version
 * prints and sets ctx->rc, returning CLI_GETOPT_STOP. */
int cli_global_option(struct cli_ctx *ctx, int opt, const char *arg);

/* "ci-ctl 0.1.0 (git abc123)" */
void cli_print_version(void);

/* What went wrong with the option getopt_long just refused (c is '?' or
 * ':'), as "unknown option --foo", "option --server needs a value" or
 * "option --json takes no value". */
void cli_option_problem(int c, char **argv, char *out, size_t size);
/* cli_getopt for commands without options of their own: returns 0, or
 * -1 when the command must return ctx->rc (help shown, usage error). */
int cli_no_options(struct cli_ctx *ctx, int argc, char **argv);

/*
 * The start of a command without options of its own: cli_no_options, then
 * min..max operands (max < 0: no limit), the first one a session id when
 * flags has CLI_ARGS_ID.  Returns 0 to go on, or -1 when the command must
 * return ctx->rc now (help shown, or a usage error reported).
 */
#define CLI_ARGS_ID 1
int cli_operands(struct cli_ctx *ctx, int argc, char **argv, int min, int max, int flags);

/* Prints "usage: ci-ctl NAME USAGE", the summary and the help text. */
void cli_cmd_help(const struct cli_cmd *cmd, FILE *out);
/* Reports a usage error for the current command; returns CLI_EXIT_USAGE. */
int cli_usage_error(struct cli_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Checks the operand count: min..max (max < 0: no limit). */
int cli_want_args(struct cli_ctx *ctx, int argc, int min, int max);

/* Usage error for an empty session id (it would name the collection). */
int cli_check_id(struct cli_ctx *ctx, const char *id);

/*
 * cli_check_id, then a session id prefix made whole, as docker does: an
 * id that is not a full one (36 characters) is looked up in GET
 * /v1/sessions; when exactly one session's id starts with it, *id is
 * replaced by that id (kept in ctx, freed by main).  Several: an error
 * listing them (exit CLI_EXIT_USAGE).  None, or a listing that fails: *id
 * stays, and the server answers for it (404 not_found, 410 expired).
 * Returns 0 or the exit status.
 */
int cli_session_id(struct cli_ctx *ctx, char **id);
#define CLI_ID_LEN 36

/* The client for ctx->server, made on first use; NULL after reporting a
 * bad server URL (exit CLI_EXIT_USAGE). */
struct client *cli_client(struct cli_ctx *ctx);

/*
 * Runs one request.  Returns 0 with resp holding a 2xx answer; else
 * reports the failure (see cli_report) and returns its exit status.  resp
 * must be released with client_resp_release() either way.  `what`, when
 * not NULL, prefixes the message ("rm 1a2b").
 */
int cli_call(struct cli_ctx *ctx, const struct client_req *req, struct client_resp *resp,
	     const char *what);

/* DELETE COLLECTION/NAME (escaped), printing "DONE NAME" on success (not
 * with --json); an empty NAME is a usage error naming WHAT. */
int cli_delete(struct cli_ctx *ctx, const char *collection, const char *name, const char *what,
	       const char *done);

/*
 * cli_call, then the answer, the same for every command that shows a JSON
 * object: with --json it is printed as is and *doc stays NULL; otherwise it
 * is parsed (depth-capped, lib/json.h) into *doc (freed by the caller with
 * json_free). An answer that is not a JSON object is reported and gives
 * CLI_EXIT_API.
 */
int cli_call_doc(struct cli_ctx *ctx, const struct client_req *req, struct client_resp *resp,
		 yajl_val *doc);

/*
 * GET path, with "?param=VALUE" (value escaped) when value is not NULL, and
 * the answer's list, its array member key: CLI_EXIT_OK with *doc (the
 * caller's, json_free) and *list borrowed from it. With --json the answer
 * is printed as is and *doc is NULL. An answer without the list is reported
 * (CLI_EXIT_API).
 */
int cli_get_list(struct cli_ctx *ctx, const char *path, const char *param, const char *value,
		 const char *key, yajl_val *doc, yajl_val *list);

/*
 * Prints "ci-ctl: [what: ]code: message (HTTP 404)" or a transport error
 * to stderr; in --json mode an API error document in resp (may be NULL)
 * also goes to stdout as is.  Returns the exit status (cli_exit_status).
 */
int cli_report(struct cli_ctx *ctx, const struct err *e, const struct client_resp *resp,
	       const char *what);

/*
 * An {"error":{...}} event inside a 200 stream (exec, events): the call
 * failed after the answer started.  Gives *err (see err_give) an error with
 * the event's message and code (peer_code, "internal" when it has none), so
 * cli_report prints it like an answer's and it exits CLI_EXIT_API.
 * Returns -1.
 */
int cli_stream_error(struct err **err, const char *code, const char *msg);

/*
 * Cuts a stream of lines (NDJSON) as it arrives: appends data to line
 * (capped by line->max) and hands each complete line to fn, NUL-terminated
 * in place of its '\n'.  Returns 0, or -1 with fn's error, or with
 * "WHAT longer than the 64 KiB cap" (unavailable) when a line would pass
 * the cap.  What stays in line once the stream ends is a last line without
 * its newline.
 */
typedef int (*cli_line_fn)(void *arg, const char *line, size_t len, struct err **err);
int cli_lines_feed(struct buf *line, const char *data, size_t len, const char *what, cli_line_fn fn,
		   void *arg, struct err **err);

/* Text for the request body must be valid UTF-8: the server refuses it
 * otherwise, so ci-ctl refuses it first, as a usage error with this text. */
#define CLI_NOT_UTF8 "text is not valid UTF-8"
int cli_utf8(const char *s);

/* cmd_exec.c, shared with run: shows an exec result (stdout and stderr too
 * with print_streams; displays saved to save_dir when set) and maps its
 * status to the exit status; reads code from FILE, or stdin for NULL or
 * "-" (caller frees). */
int cli_exec_report(struct cli_ctx *ctx, yajl_val r, int print_streams, const char *save_dir);
char *cli_read_code(const char *file, size_t *len, struct err **err);

/* cmd_session.c: create's option parsing and request, shared with restore:
 * with restore set it takes a SNAP_ID operand or --workspace NAME (one of
 * them) and reports what was restored (cli_restore_print). */
int cli_session_create(struct cli_ctx *ctx, int argc, char **argv, int restore);

/* cmd_snapshot.c, shared with create: what a create answer says was
 * restored (stderr); the workspace-name and glob rules the server applies
 * (cli_glob_check reports a usage error and returns its status, else 0). */
void cli_restore_print(yajl_val doc);
int cli_workspace_name_ok(const char *name);
int cli_glob_check(struct cli_ctx *ctx, const char *flag, const char *glob);

/* cmd_session.c: -o FORMAT (json sets ctx->json; wide, name kept in
 * ctx->output); a usage error's status for another. */
int cli_output_format(struct cli_ctx *ctx, const char *arg);

/* "/v1/sessions/ID" + suffix with ID escaped; caller frees. */
char *cli_session_path(const char *id, const char *suffix);

#endif

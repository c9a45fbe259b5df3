/* fixer.h: the model that fixes code, an OpenAI-compatible chat
 * completions endpoint (what llama.cpp's server, vLLM, Ollama and the hosted
 * APIs speak), asked on the loop through httpc with a deadline.
 *
 * The prompt (fixer_prompt_json) carries the goal, the code, the error and
 * its traceback, the tails of stdout and stderr, the session's variables
 * (names and types; a DataFrame's shape, columns and dtypes, an array's
 * shape and dtype) and its files; the fixed code is the reply's first
 * fenced code block (fixer_reply_code). Both are pure, for the unit tests
 * and the fuzzer. A fixer that is down, slow, or answers nonsense gives an
 * error that says which; it never gives code it did not find. */
#ifndef CI_FIXER_H
#define CI_FIXER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct httpc;
struct fixer_call;

/* Where the model is. url is the API base ("http://host:port/v1"; the
 * client appends "/chat/completions"); key is the bearer token, or NULL. */
struct fixer_target {
	const char *url;
	const char *model;
	const char *key;
};

/* A variable of the session. A DataFrame, a Series or an array also says
 * its shape ("(5, 2)"), an array's or a Series' dtype, and a DataFrame its
 * columns (each name as Python's repr, and its dtype), the first n_cols of
 * cols_total; NULL and 0 when not known. All borrowed, capped in the
 * prompt. */
struct fixer_var {
	const char *name;
	const char *type;
	const char *shape;
	const char *dtype;
	const char *const *col_names;
	const char *const *col_types;
	size_t n_cols;
	int64_t cols_total;
};

/* What went wrong, for the prompt. Strings borrowed; NULL or 0 leaves a
 * part out. Every part is cut to a bounded size in the prompt. */
struct fixer_prompt {
	const char *goal;
	const char *code;
	size_t code_len;
	const char *ename, *evalue;
	const char *const *traceback;
	size_t n_traceback;
	const char *stdout_tail, *stderr_tail;
	const struct fixer_var *vars;
	size_t n_vars;
	const char *const *files;
	size_t n_files;
	int attempt, max_attempts; /* the attempt that failed, of how many */
};

/* The chat completions request body for t and p; caller frees. */
char *fixer_prompt_json(const struct fixer_target *t, const struct fixer_prompt *p, size_t *len);

/* The code of a chat completions answer (choices[0].message.content's
 * first fenced block, ```python or bare ```): 0 with *code (caller frees)
 * and *len, or -1 with why (not JSON, no choices, no fenced block, an
 * empty block). */
int fixer_reply_code(const char *body, size_t len, char **code, size_t *code_len,
		     struct err **errp);

/* How an ask ended: code (borrowed for the callback) or error (down,
 * deadline, HTTP status, nonsense), and how long the model took. */
struct fixer_reply {
	const struct err *error;
	const char *code;
	size_t len;
	int64_t fixer_ms;
};
typedef void (*fixer_done_cb)(const struct fixer_reply *r, void *arg);

/* Ask t for a fix of p, giving up after timeout_ms. t and p are only read
 * during the call. The callback runs once, never inside this call, unless
 * cancelled. */
struct fixer_call *fixer_ask(struct httpc *h, const struct fixer_target *t,
			     const struct fixer_prompt *p, int64_t timeout_ms, fixer_done_cb cb,
			     void *arg, struct err **errp);
void fixer_cancel(struct fixer_call *c);

#endif

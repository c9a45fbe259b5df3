/* fixer.c: asking the fixer model (fixer.h) over httpc: POST
 * <url>/chat/completions with the prompt, a bearer key when there is one,
 * a deadline, and a 1 MiB cap on the answer; the answer's first fenced
 * block is the code. Every way it can go wrong ends in an error that says
 * which (unreachable, deadline, an HTTP status, nonsense), naming the
 * fixer's URL, so an attempt's record tells the caller what happened. */
#include "fixer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "httpc.h"
#include "json.h"
#include "xalloc.h"

#define FIXER_REPLY_MAX (1024 * 1024)
#define FIXER_URL_MAX 2048
#define FIXER_STATUS_DETAIL_MAX 200

struct fixer_call {
	struct httpc_call *hc;
	char *url; /* the API base, for errors */
	fixer_done_cb cb;
	void *arg;
};

static void fixer_call_free(struct fixer_call *c)
{
	free(c->url);
	free(c);
}

/* The error message of an OpenAI-style error answer, cut short, or "". */
static void status_detail(const char *body, size_t len, char *out, size_t size)
{
	out[0] = '\0';
	AUTOERR struct err *e = NULL;
	AUTOJSON yajl_val v = json_parse(body, len, &e);
	const char *msg = json_path_str(v, "error.message");
	if (msg == NULL)
		msg = json_get_str(v, "error");
	if (msg)
		snprintf(out, size, ": %.*s", FIXER_STATUS_DETAIL_MAX, msg);
}

static void http_done(const struct httpc_response *r, void *arg)
{
	struct fixer_call *c = arg;
	struct fixer_reply reply = {.fixer_ms = r->elapsed_ms};
	AUTOERR struct err *e = NULL;
	AUTOFREE char *code = NULL;
	if (r->error) {
		e = err_new(r->error->code, "fixer at %s: %s", c->url, r->error->message);
	} else if (r->status < 200 || r->status > 299) {
		char detail[FIXER_STATUS_DETAIL_MAX + 8];
		status_detail(r->body, r->len, detail, sizeof(detail));
		e = err_new(ERR_UNAVAILABLE, "fixer at %s answered HTTP %ld%s", c->url, r->status,
			    detail);
	} else if (fixer_reply_code(r->body, r->len, &code, &reply.len, &e) < 0) {
		err_wrap(&e, "fixer at %s", c->url);
	}
	reply.error = e;
	reply.code = e ? NULL : code;
	if (e)
		reply.len = 0;
	c->cb(&reply, c->arg);
	fixer_call_free(c);
}

struct fixer_call *fixer_ask(struct httpc *h, const struct fixer_target *t,
			     const struct fixer_prompt *p, int64_t timeout_ms, fixer_done_cb cb,
			     void *arg, struct err **errp)
{
	if (t->url == NULL || t->url[0] == '\0') {
		err_set(errp, ERR_BAD_REQUEST, "no fixer URL");
		return NULL;
	}
	size_t ulen = strlen(t->url);
	while (ulen > 0 && t->url[ulen - 1] == '/')
		ulen--;
	if (ulen > FIXER_URL_MAX) {
		err_set(errp, ERR_BAD_REQUEST, "the fixer's URL is longer than %d bytes",
			FIXER_URL_MAX);
		return NULL;
	}
	char endpoint[FIXER_URL_MAX + 32];
	snprintf(endpoint, sizeof(endpoint), "%.*s/chat/completions", (int)ulen, t->url);
	AUTOFREE char *auth = NULL;
	const char *headers[2] = {"Content-Type: application/json", NULL};
	size_t n_headers = 1;
	if (t->key && t->key[0]) {
		if (strpbrk(t->key, "\r\n")) {
			/* A line break would end the header and start another. */
			err_set(errp, ERR_BAD_REQUEST, "the fixer's key holds a line break");
			return NULL;
		}
		if (asprintf(&auth, "Authorization: Bearer %s", t->key) < 0)
			abort();
		headers[n_headers++] = auth;
	}
	size_t blen;
	AUTOFREE char *body = fixer_prompt_json(t, p, &blen);
	struct fixer_call *c = xmalloc(sizeof(*c));
	*c = (struct fixer_call){.url = xstrndup(t->url, ulen), .cb = cb, .arg = arg};
	c->hc = httpc_post(h, endpoint, headers, n_headers, body, blen, timeout_ms, FIXER_REPLY_MAX,
			   http_done, c, errp);
	if (c->hc == NULL) {
		err_wrap(errp, "fixer at %s", c->url);
		fixer_call_free(c);
		return NULL;
	}
	return c;
}

/* The HTTP call goes with it: a fix nobody waits for is not read. */
void fixer_cancel(struct fixer_call *c)
{
	if (c) {
		httpc_cancel(c->hc);
		fixer_call_free(c);
	}
}

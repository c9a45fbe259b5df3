/* TEMPORARY (lead's runs branch only, never merged): the parts other
 * helpers build, as the smallest stand-ins, so the engine links. */
#include <stdlib.h>
#include <string.h>

#include "defer.h"
#include "digest.h"
#include "fix_rules.h"
#include "fixer.h"
#include "failure_sig.h"
#include "reviews.h"
#include "stateless.h"
#include "store_failures.h"
#include "store_reviews.h"
#include "store_internal.h"
#include "xalloc.h"

const char *failure_class_name(enum failure_class c)
{
	(void)c;
	return NULL;
}
enum failure_class failure_classify(const struct failure_input *in)
{
	(void)in;
	return FAILURE_CLASS_NONE;
}
void failure_desc_clear(struct failure_desc *d)
{
	(void)d;
}
void failure_signature(const struct failure_input *in, char sig[FAILURE_SIG_HEX + 1],
		       struct failure_desc *desc)
{
	(void)desc;
	char hex[DIGEST_HEX_LEN + 1];
	const char *n = in->r->ename ? in->r->ename : "x";
	digest_sha256_hex(n, strlen(n), hex);
	memcpy(sig, hex, FAILURE_SIG_HEX);
	sig[FAILURE_SIG_HEX] = 0;
}
bool failure_record_hopeless(const struct failure_record *r, int64_t min_seen)
{
	(void)r;
	(void)min_seen;
	return false;
}
struct seen {
	store_failure_cb cb;
	void *arg;
};
static void seen_cb(evutil_socket_t fd, short w, void *arg)
{
	(void)fd;
	(void)w;
	struct seen *s = arg;
	s->cb(NULL, NULL, s->arg);
	free(s);
}
void store_failure_seen(struct store *st, const char *tenant, const char *sig,
			const struct failure_desc *desc, enum failure_class cls, int64_t ttl_s,
			store_failure_cb cb, void *arg)
{
	(void)tenant;
	(void)sig;
	(void)desc;
	(void)cls;
	(void)ttl_s;
	struct seen *s = xcalloc(1, sizeof(*s));
	s->cb = cb;
	s->arg = arg;
	defer_call(st->base, seen_cb, s);
}
void store_failure_note(struct store *st, const char *tenant, const char *sig,
			enum failure_outcome o)
{
	(void)st;
	(void)tenant;
	(void)sig;
	(void)o;
}
void fix_rules_apply(const struct fix_rule_input *in, struct fix_rule_outcome *out)
{
	(void)in;
	memset(out, 0, sizeof(*out));
}
void fix_rule_outcome_clear(struct fix_rule_outcome *o)
{
	free(o->code);
	free(o->note);
	free(o->package);
	memset(o, 0, sizeof(*o));
}
struct fixer_call *fixer_ask(struct httpc *h, const struct fixer_target *t,
			     const struct fixer_prompt *p, int64_t timeout_ms, fixer_done_cb cb,
			     void *arg, struct err **errp)
{
	(void)h;
	(void)t;
	(void)p;
	(void)timeout_ms;
	(void)cb;
	(void)arg;
	err_set(errp, ERR_UNAVAILABLE, "no fixer yet");
	return NULL;
}
void fixer_cancel(struct fixer_call *c)
{
	(void)c;
}
bool stateless_available(const struct stateless *t)
{
	(void)t;
	return false;
}
struct stateless_call *stateless_run(struct stateless *t, const char *code, size_t len,
				     int64_t timeout_s, stateless_done_cb cb, void *arg,
				     struct err **errp)
{
	(void)t;
	(void)code;
	(void)len;
	(void)timeout_s;
	(void)cb;
	(void)arg;
	err_set(errp, ERR_UNAVAILABLE, "no tier");
	return NULL;
}
void stateless_cancel(struct stateless_call *c)
{
	(void)c;
}
void reviews_open(struct reviews *rv, const char *tenant, const char *run_id, const char *case_json,
		  size_t case_len, reviews_open_cb cb, void *arg)
{
	(void)rv;
	(void)tenant;
	(void)run_id;
	(void)case_json;
	(void)case_len;
	(void)cb;
	(void)arg;
}
const char *review_state_name(enum review_state s)
{
	return s == REVIEW_PENDING ? "pending" : s == REVIEW_APPROVED ? "approved" : "rejected";
}
void store_review_get(struct store *st, const char *tenant, const char *id, store_reviews_cb cb,
		      void *arg)
{
	(void)st;
	(void)tenant;
	(void)id;
	(void)cb;
	(void)arg;
}

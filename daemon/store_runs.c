/* store_runs.c: runs' records (store_runs.h). What Redis gives back is
 * checked like any outside input: a record of the wrong shape is none. */
#include "store_runs.h"
#include "store_internal.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apikey.h"
#include "defer.h"
#include "xalloc.h"

/* A record bigger than this is refused on the way back (a run holds at
 * most RUN_MAX_ATTEMPTS capped results; this is well above). */
#define RUN_RECORD_MAX (64u << 20)

void store_run_put(struct store *st, const char *tenant, const char *id, const char *json,
		   size_t len, bool done, int64_t ttl_s)
{
	if (st->ac == NULL || !st->connected)
		return; /* the node's copy still answers; the next change writes it */
	char key[160];
	snprintf(key, sizeof(key), "%srun:%s", st->prefix, id);
	const char *argv[] = {"HSET",           key,    "tenant", tenant, "done",
			      done ? "1" : "0", "json", json};
	size_t lens[] = {4, strlen(key), 6, strlen(tenant), 4, 1, 4, len};
	redisAsyncCommandArgv(st->ac, NULL, NULL, 8, argv, lens);
	redisAsyncCommand(st->ac, NULL, NULL, "PEXPIRE %s %lld", key, (long long)ttl_s * 1000);
}

struct run_get {
	store_run_cb cb;
	void *arg;
};

static void get_fail_deferred(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct run_get *g = arg;
	g->cb(&(struct err){.code = ERR_UNAVAILABLE,
			    .message = "redis: not reachable (a run's record)"},
	      NULL, NULL, 0, false, g->arg);
	free(g);
}

static void get_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	(void)ac;
	struct run_get *g = privdata;
	redisReply *r = reply;
	if (r == NULL || r->type == REDIS_REPLY_ERROR) {
		char msg[160];
		snprintf(msg, sizeof(msg), "redis: %.120s", r ? r->str : "not reachable (a run)");
		g->cb(&(struct err){.code = ERR_UNAVAILABLE, .message = msg}, NULL, NULL, 0, false,
		      g->arg);
		free(g);
		return;
	}
	bool ok = r->type == REDIS_REPLY_ARRAY && r->elements == 3;
	for (size_t i = 0; ok && i < 3; i++)
		ok = r->element[i]->type == REDIS_REPLY_STRING;
	if (ok)
		ok = apikey_tenant_valid(r->element[0]->str) &&
		     r->element[2]->len <= RUN_RECORD_MAX && r->element[2]->len > 0;
	if (!ok)
		g->cb(NULL, NULL, NULL, 0, false, g->arg);
	else
		g->cb(NULL, r->element[0]->str, r->element[2]->str, r->element[2]->len,
		      strcmp(r->element[1]->str, "1") == 0, g->arg);
	free(g);
}

void store_run_get(struct store *st, const char *id, store_run_cb cb, void *arg)
{
	struct run_get *g = xcalloc(1, sizeof(*g));
	g->cb = cb;
	g->arg = arg;
	if (st->ac == NULL || !st->connected) {
		defer_call(st->base, get_fail_deferred, g);
		return;
	}
	redisAsyncCommand(st->ac, get_reply, g, "HMGET %srun:%s tenant done json", st->prefix, id);
}

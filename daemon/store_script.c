/* store_script.c: a Redis command with its own copy of its arguments, and
 * the Lua scripts sent with it (store_internal.h): the one way the
 * store_*.c files send a script, learn its digest and resend it whole
 * after NOSCRIPT. What a reply means stays each file's. */
#include "store_internal.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

void store_cmd_take(struct store_cmd *c, char *s)
{
	if (c->argc >= STORE_CMD_MAX_ARGS)
		abort(); /* a bug in a store file: the commands are fixed */
	c->lens[c->argc] = strlen(s);
	c->argv[c->argc++] = s;
}

void store_cmd_argn(struct store_cmd *c, const char *s, size_t len)
{
	if (c->argc >= STORE_CMD_MAX_ARGS)
		abort(); /* a bug in a store file: the commands are fixed */
	char *p = xmalloc(len + 1);
	memcpy(p, s, len);
	p[len] = '\0';
	c->lens[c->argc] = len;
	c->argv[c->argc++] = p;
}

void store_cmd_arg(struct store_cmd *c, const char *s)
{
	store_cmd_argn(c, s, strlen(s));
}

void store_cmd_argf(struct store_cmd *c, const char *fmt, ...)
{
	char *s = NULL;
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		abort();
	va_end(ap);
	store_cmd_take(c, s);
}

void store_cmd_init(struct store_cmd *c, struct store_script *sc)
{
	memset(c, 0, sizeof(*c));
	c->sc = sc;
	if (sc) {
		store_cmd_arg(c, "EVAL");
		store_cmd_arg(c, sc->text);
	}
}

void store_cmd_clear(struct store_cmd *c)
{
	if (c->deadline)
		event_free(c->deadline);
	c->deadline = NULL;
	for (int i = 0; i < c->argc; i++)
		free(c->argv[i]);
	c->argc = 0;
}

static void script_loaded(redisAsyncContext *ac, void *reply, void *privdata)
{
	(void)ac;
	struct store_script *sc = privdata;
	redisReply *r = reply;
	sc->loading = false;
	if (r && r->type == REDIS_REPLY_STRING && r->len == 40)
		memcpy(sc->sha, r->str, 41);
}

void store_script_load(redisAsyncContext *ac, struct store_script *sc)
{
	if (!sc->loading && !sc->sha[0])
		sc->loading = redisAsyncCommand(ac, script_loaded, sc, "SCRIPT LOAD %s",
						sc->text) == REDIS_OK;
}

/* argv[0..1]: cmd and what goes with it. */
static void cmd_use(struct store_cmd *c, const char *cmd, const char *text)
{
	free(c->argv[0]);
	free(c->argv[1]);
	c->argv[0] = xstrdup(cmd);
	c->argv[1] = xstrdup(text);
	c->lens[0] = strlen(cmd);
	c->lens[1] = strlen(text);
}

static int cmd_send_argv(redisAsyncContext *ac, struct store_cmd *c, redisCallbackFn *fn,
			 void *privdata)
{
	return redisAsyncCommandArgv(ac, fn, privdata, c->argc, (const char **)c->argv, c->lens) ==
		       REDIS_OK
		   ? 0
		   : -1;
}

int store_cmd_send(redisAsyncContext *ac, struct store_cmd *c, redisCallbackFn *fn, void *privdata)
{
	struct store_script *sc = c->sc;
	if (sc && sc->sha[0] && !c->retried)
		cmd_use(c, "EVALSHA", sc->sha);
	else if (sc && !c->retried)
		store_script_load(ac, sc);
	return cmd_send_argv(ac, c, fn, privdata);
}

bool store_cmd_retry(struct store *st, redisAsyncContext *ac, struct store_cmd *c, redisReply **rp,
		     bool load, redisCallbackFn *fn, void *privdata)
{
	const redisReply *r = *rp;
	/* Only on the context we send on: a reply from one going away is its
	 * last. */
	if (r == NULL || r->type != REDIS_REPLY_ERROR || c->sc == NULL || c->retried ||
	    strncmp(r->str, "NOSCRIPT", 8) != 0 || ac == NULL || st->ac != ac)
		return false;
	/* This Redis has not seen the script: send it whole. */
	c->retried = true;
	c->sc->sha[0] = '\0';
	if (load)
		store_script_load(ac, c->sc);
	cmd_use(c, "EVAL", c->sc->text);
	if (cmd_send_argv(ac, c, fn, privdata) == 0)
		return true;
	*rp = NULL;
	return false;
}

void store_cmd_deadline(struct store_cmd *c, struct event_base *base, int seconds,
			event_callback_fn cb, void *arg)
{
	c->deadline = evtimer_new(base, cb, arg);
	struct timeval tv = {seconds, 0};
	evtimer_add(c->deadline, &tv);
}

const char *store_reply_error(const redisReply *r, char *buf, size_t size)
{
	if (r == NULL)
		return "redis: connection lost";
	if (r->type != REDIS_REPLY_ERROR)
		return NULL;
	snprintf(buf, size, "redis: %.256s", r->str);
	return buf;
}

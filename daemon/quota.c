/* quota.c: quota names, overrides from JSON, merging and Retry-After
 * (quota.h). A parser of outside input (an admin's body, what Redis holds):
 * fuzzed by tests/fuzz/fuzz_quota.c. */
#include "quota.h"

#include <string.h>

#include "json.h"

static const char *const names[QUOTA_COUNT] = {
    [QUOTA_SESSIONS] = "sessions",
    [QUOTA_EXECUTIONS] = "executions",
    [QUOTA_MEMORY_MB] = "memory_mb",
    [QUOTA_EXEC_SECONDS_PER_HOUR] = "exec_seconds_per_hour",
    [QUOTA_REQUESTS_PER_SECOND] = "requests_per_second",
    [QUOTA_DISK_MB] = "disk_mb",
    [QUOTA_SNAPSHOT_KEEP] = "snapshot_keep",
    [QUOTA_SNAPSHOT_MAX_AGE_S] = "snapshot_max_age_s",
    [QUOTA_STATELESS] = "stateless",
    [QUOTA_STATELESS_RUNS] = "stateless_runs",
};

const char *quota_name(enum quota_name n)
{
	return (unsigned)n < QUOTA_COUNT ? names[n] : "?";
}

int quota_lookup(const char *name, size_t len, enum quota_name *out)
{
	for (int i = 0; i < QUOTA_COUNT; i++)
		if (strlen(names[i]) == len && memcmp(names[i], name, len) == 0) {
			*out = (enum quota_name)i;
			return 0;
		}
	return -1;
}

void quota_from_config(const struct config *cfg, struct quota *out)
{
	out->v[QUOTA_SESSIONS] = cfg->quota_sessions;
	out->v[QUOTA_EXECUTIONS] = cfg->quota_executions;
	out->v[QUOTA_MEMORY_MB] = cfg->quota_memory_mb;
	out->v[QUOTA_EXEC_SECONDS_PER_HOUR] = cfg->quota_exec_seconds_per_hour;
	out->v[QUOTA_REQUESTS_PER_SECOND] = cfg->quota_requests_per_second;
	out->v[QUOTA_DISK_MB] = cfg->quota_disk_mb;
	out->v[QUOTA_SNAPSHOT_KEEP] = cfg->snapshot_keep;
	out->v[QUOTA_SNAPSHOT_MAX_AGE_S] = cfg->snapshot_max_age_s;
	out->v[QUOTA_STATELESS] = cfg->quota_stateless ? 1 : 0;
	out->v[QUOTA_STATELESS_RUNS] = cfg->quota_stateless_runs;
}

int quota_override_parse(const char *text, size_t len, struct quota_override *out,
			 struct err **errp)
{
	memset(out, 0, sizeof(*out));
	AUTOJSON yajl_val v = json_parse(text, len, errp);
	if (v == NULL)
		return -1;
	return quota_override_from_json(v, out, errp);
}

int quota_override_from_json(yajl_val v, struct quota_override *out, struct err **errp)
{
	memset(out, 0, sizeof(*out));
	struct quota_override o = {0};
	if (!YAJL_IS_OBJECT(v))
		return err_set(errp, ERR_BAD_REQUEST, "quota: expected an object, got %s",
			       json_type_name(v));
	for (size_t i = 0; i < v->u.object.len; i++) {
		const char *k = v->u.object.keys[i];
		yajl_val x = v->u.object.values[i];
		enum quota_name n;
		if (quota_lookup(k, strlen(k), &n) < 0)
			return err_set(errp, ERR_BAD_REQUEST,
				       "quota: unknown name '%.64s' (known: sessions, executions, "
				       "memory_mb, exec_seconds_per_hour, requests_per_second, "
				       "disk_mb, snapshot_keep, snapshot_max_age_s, stateless, "
				       "stateless_runs)",
				       k);
		if (n == QUOTA_STATELESS) { /* a permission: true or false */
			if (!YAJL_IS_TRUE(x) && !YAJL_IS_FALSE(x))
				return err_set(errp, ERR_BAD_REQUEST,
					       "quota: %s: expected true or false, got %s", k,
					       json_type_name(x));
			o.set |= 1u << n;
			o.v[n] = YAJL_IS_TRUE(x) ? 1 : 0;
			continue;
		}
		if (!YAJL_IS_INTEGER(x))
			return err_set(errp, ERR_BAD_REQUEST,
				       "quota: %s: expected an integer, got %s", k,
				       json_type_name(x));
		int64_t n64 = YAJL_GET_INTEGER(x);
		if (n64 < 0 || n64 > QUOTA_MAX_VALUE)
			return err_set(
			    errp, ERR_BAD_REQUEST,
			    "quota: %s: %lld is out of range (0 = unlimited, at most %lld)", k,
			    (long long)n64, (long long)QUOTA_MAX_VALUE);
		o.set |= 1u << n;
		o.v[n] = n64;
	}
	*out = o; /* all or nothing */
	return 0;
}

void quota_merge(const struct quota *defaults, const struct quota_override *o, struct quota *out)
{
	for (int i = 0; i < QUOTA_COUNT; i++)
		out->v[i] = o && (o->set & (1u << i)) ? o->v[i] : defaults->v[i];
}

static void value_to_json(yajl_gen g, int i, int64_t v)
{
	if (i == QUOTA_STATELESS)
		jg_kv_bool(g, names[i], v != 0);
	else
		jg_kv_int(g, names[i], v);
}

void quota_to_json(const struct quota *q, yajl_gen g)
{
	jg_obj(g);
	for (int i = 0; i < QUOTA_COUNT; i++)
		value_to_json(g, i, q->v[i]);
	jg_obj_end(g);
}

void quota_override_to_json(const struct quota_override *o, yajl_gen g)
{
	jg_obj(g);
	for (int i = 0; i < QUOTA_COUNT; i++)
		if (o->set & (1u << i))
			value_to_json(g, i, o->v[i]);
	jg_obj_end(g);
}

int64_t quota_burst(int64_t rate)
{
	return rate * 2 < 1 ? 1 : rate * 2;
}

int64_t quota_retry_after_ms(int64_t ms)
{
	if (ms <= 1000)
		return 1;
	/* A day is more than any window here; a larger value is Redis's noise. */
	if (ms > 86400000)
		return 86400;
	return (ms + 999) / 1000;
}

int64_t quota_retry_after_bucket(int64_t milli_tokens, int64_t rate)
{
	if (rate <= 0 || milli_tokens >= 1000)
		return 1;
	if (milli_tokens < 0)
		milli_tokens = 0;
	/* (1000 - mt) thousandths of a token at rate tokens a second. */
	return quota_retry_after_ms(((1000 - milli_tokens) + rate - 1) / rate);
}

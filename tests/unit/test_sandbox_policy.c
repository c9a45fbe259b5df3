/* test_sandbox_policy.c: per-session uids and the seccomp profile. */
#include <stdlib.h>

#include "json.h"
#include "seccomp.h"
#include "uid_range.h"
#include "unit.h"

TEST(uid_range_hands_out_each_uid_once_round_robin)
{
	struct uid_range *r = uid_range_new(200000, 3);
	CHECK(uid_range_take(r) == 200000);
	CHECK(uid_range_take(r) == 200001);
	uid_range_release(r, 200000);
	/* The uid just released comes back last. */
	CHECK(uid_range_take(r) == 200002);
	CHECK(uid_range_take(r) == 200000);
	CHECK(uid_range_take(r) == -1);
	CHECK(uid_range_used(r) == 3);
	uid_range_release(r, 200001);
	uid_range_release(r, 200001); /* twice: ignored */
	uid_range_release(r, 5);      /* outside: ignored */
	CHECK(uid_range_used(r) == 2);
	CHECK(uid_range_mark(r, 200001));
	CHECK(!uid_range_mark(r, 200001));
	CHECK(!uid_range_mark(r, 200003));
	CHECK(!uid_range_mark(r, 199999));
	uid_range_free(r);
	uid_range_free(NULL);
}

TEST(uid_range_spans_bitmap_words)
{
	struct uid_range *r = uid_range_new(1000, 130);
	for (int i = 0; i < 130; i++)
		CHECK(uid_range_take(r) == 1000 + i);
	CHECK(uid_range_take(r) == -1);
	uid_range_release(r, 1000 + 64);
	CHECK(uid_range_take(r) == 1000 + 64);
	uid_range_free(r);
}

static bool names_syscall(yajl_val calls, const char *name, const char *action, int64_t errno_ret)
{
	for (size_t i = 0; i < calls->u.array.len; i++) {
		yajl_val c = calls->u.array.values[i];
		yajl_val names = json_get(c, "names");
		const char *act = json_get_str(c, "action");
		for (size_t j = 0; names && j < names->u.array.len; j++) {
			if (strcmp(names->u.array.values[j]->u.string, name) != 0)
				continue;
			int64_t ret = -1;
			json_get_int(c, "errnoRet", &ret);
			return act && strcmp(act, action) == 0 &&
			       (errno_ret < 0 || ret == errno_ret);
		}
	}
	return false;
}

TEST(seccomp_builtin_profile_denies_what_docs_say)
{
	struct err *e = NULL;
	char *p = seccomp_profile_load(NULL, &e);
	CHECK(p != NULL && e == NULL);
	CHECK(strchr(p, '\n') == NULL && strchr(p, '\t') == NULL); /* compacted */
	yajl_val v = json_parse(p, strlen(p), &e);
	CHECK(v != NULL);
	CHECK_STR(json_get_str(v, "defaultAction"), "SCMP_ACT_ERRNO");
	yajl_val calls = json_get(v, "syscalls");
	CHECK(calls && YAJL_IS_ARRAY(calls));
	if (calls && YAJL_IS_ARRAY(calls)) {
		CHECK(names_syscall(calls, "io_uring_setup", "SCMP_ACT_ERRNO", 1));
		CHECK(names_syscall(calls, "ptrace", "SCMP_ACT_ERRNO", 1));
		CHECK(names_syscall(calls, "clone3", "SCMP_ACT_ERRNO", 38));
		CHECK(names_syscall(calls, "read", "SCMP_ACT_ALLOW", -1));
		CHECK(!names_syscall(calls, "unshare", "SCMP_ACT_ALLOW", -1));
		CHECK(!names_syscall(calls, "bpf", "SCMP_ACT_ALLOW", -1));
	}
	yajl_tree_free(v);
	free(p);
	/* "engine" leaves the engine's default: no profile, no error. */
	CHECK(seccomp_profile_load("engine", &e) == NULL && e == NULL);
	CHECK(seccomp_profile_load("/nonexistent/profile.json", &e) == NULL && e != NULL);
	err_free(e);
}

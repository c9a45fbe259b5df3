/* unit.h: a minimal test runner for the daemon's pure modules.
 *
 * TEST(name) { ... } registers a test; CHECK(cond) records a failure and
 * goes on; the runner prints one line per failure and a closing
 * "N passed, N failed" line, and exits non-zero on any failure. */
#ifndef CI_UNIT_H
#define CI_UNIT_H

#include <stdio.h>
#include <string.h>

struct unit_test {
	const char *name;
	void (*fn)(void);
	struct unit_test *next;
};

void unit_register(struct unit_test *t);
extern int unit_failures_in_test;

#define TEST(name)                                                        \
	static void test_##name(void);                                    \
	static struct unit_test unit_##name = {#name, test_##name, NULL}; \
	__attribute__((constructor)) static void register_##name(void)    \
	{                                                                 \
		unit_register(&unit_##name);                              \
	}                                                                 \
	static void test_##name(void)

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "  %s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
			unit_failures_in_test++;                                                   \
		}                                                                                  \
	} while (0)

#define CHECK_STR(a, b)                                                                          \
	do {                                                                                     \
		const char *a_ = (a), *b_ = (b);                                                 \
		if (a_ == NULL || b_ == NULL || strcmp(a_, b_) != 0) {                           \
			fprintf(stderr,                                                          \
				"  %s:%d: CHECK_STR failed: %s == \"%s\", expected \"%s\"\n",    \
				__FILE__, __LINE__, #a, a_ ? a_ : "(null)", b_ ? b_ : "(null)"); \
			unit_failures_in_test++;                                                 \
		}                                                                                \
	} while (0)

#endif

/* main.c: runs every registered unit test; "N passed, N failed" last. */
#include <stdlib.h>

#include "unit.h"

static struct unit_test *tests, **tests_tail = &tests;
int unit_failures_in_test;

void unit_register(struct unit_test *t)
{
	*tests_tail = t;
	tests_tail = &t->next;
}

int main(int argc, char **argv)
{
	int passed = 0, failed = 0;
	for (struct unit_test *t = tests; t; t = t->next) {
		if (argc > 1 && strstr(t->name, argv[1]) == NULL)
			continue;
		unit_failures_in_test = 0;
		t->fn();
		if (unit_failures_in_test) {
			fprintf(stderr, "FAIL %s\n", t->name);
			failed++;
		} else {
			passed++;
		}
	}
	printf("unit: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

/* fix_rules.h: deterministic repairs tried before the model, with no round
 * trip (docs/workflow.md has the table). Pure, unit-tested, one test per
 * rule.
 *
 * A rule either repairs the code (a NameError on a well-known alias: add
 * the import), or reports what it found without code (a module that is not
 * in the image: the package it needs), or does not apply. */
#ifndef CI_FIX_RULES_H
#define CI_FIX_RULES_H

#include <stddef.h>

#include "exec_result.h"

enum fix_rule_kind {
	FIX_RULE_NONE,   /* no rule applies */
	FIX_RULE_REPAIR, /* code is the repaired code */
	FIX_RULE_REPORT, /* no code; note says what is needed */
};

/* What failed. Borrowed. files: the paths under /workspace, relative
 * ("data/sales.csv"). */
struct fix_rule_input {
	const struct exec_result *r;
	const char *code;
	size_t code_len;
	const char *const *files;
	size_t n_files;
};

struct fix_rule_outcome {
	enum fix_rule_kind kind;
	const char *rule; /* the rule's name (static), or NULL */
	char *code;       /* REPAIR: owned */
	size_t code_len;
	char *note;    /* what the rule did or found, for the attempt; owned */
	char *package; /* REPORT of a missing module: the package; owned, or NULL */
};

void fix_rules_apply(const struct fix_rule_input *in, struct fix_rule_outcome *out);
void fix_rule_outcome_clear(struct fix_rule_outcome *o);

#endif

/* runs.c: PLACEHOLDER. The run engine is the lead's (issue 12); the lead's
 * real runs.c replaces this file at the merge. It is here only so that the
 * review queue's branch links (api_reviews.c calls runs_review_decided when
 * api->runs is set, which it never is on this branch). */
#include "runs.h"

void runs_review_decided(struct runs *r, const char *tenant, const char *run_id,
			 const char *review_id, bool approved, const char *code, size_t code_len,
			 const char *comment)
{
	(void)r;
	(void)tenant;
	(void)run_id;
	(void)review_id;
	(void)approved;
	(void)code;
	(void)code_len;
	(void)comment;
}

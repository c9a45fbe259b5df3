/* uid_range.h: host uids for sandboxes, one per session.
 *
 * The kernel keeps some quotas per user: inotify instances and watches, the
 * POSIX message-queue budget, pipe buffers, RLIMIT_NPROC. Sandboxes run
 * without a user namespace, so if they all ran as one uid, one session could
 * exhaust those for every other. Each session (warm-pool sandboxes included)
 * therefore gets a uid of its own from a configured range, its gid equal to
 * it. Pure bookkeeping, unit-tested. */
#ifndef CI_UID_RANGE_H
#define CI_UID_RANGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct uid_range;

/* [base, base + count). Caller frees (uid_range_free, NULL-safe). */
struct uid_range *uid_range_new(int64_t base, int64_t count);
void uid_range_free(struct uid_range *r);

/* A free uid, or -1 when every uid of the range is taken. Uids are handed out
 * round-robin, so a uid just released is the last to come back. */
int64_t uid_range_take(struct uid_range *r);

/* Mark uid as taken (a session adopted after a restart). False when it is
 * outside the range or already taken. */
bool uid_range_mark(struct uid_range *r, int64_t uid);

/* Give uid back; a uid outside the range or not taken is ignored. */
void uid_range_release(struct uid_range *r, int64_t uid);

size_t uid_range_used(const struct uid_range *r);

#endif

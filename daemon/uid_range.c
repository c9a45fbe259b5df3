/* uid_range.c: a bitmap over the range and a round-robin cursor. */
#include "uid_range.h"

#include "xalloc.h"

struct uid_range {
	int64_t base, count;
	int64_t cursor; /* next offset to try */
	size_t used;
	uint64_t *bits;
};

struct uid_range *uid_range_new(int64_t base, int64_t count)
{
	struct uid_range *r = xcalloc(1, sizeof(*r));
	r->base = base;
	r->count = count > 0 ? count : 0;
	r->bits = xcalloc((size_t)(r->count + 63) / 64, sizeof(uint64_t));
	return r;
}

void uid_range_free(struct uid_range *r)
{
	if (r == NULL)
		return;
	free(r->bits);
	free(r);
}

static bool taken(const struct uid_range *r, int64_t off)
{
	return r->bits[off / 64] >> (off % 64) & 1;
}

static void set(struct uid_range *r, int64_t off, bool on)
{
	if (on)
		r->bits[off / 64] |= 1ull << (off % 64);
	else
		r->bits[off / 64] &= ~(1ull << (off % 64));
}

int64_t uid_range_take(struct uid_range *r)
{
	if ((int64_t)r->used >= r->count)
		return -1;
	for (int64_t n = 0; n < r->count; n++) {
		int64_t off = (r->cursor + n) % r->count;
		if (!taken(r, off)) {
			set(r, off, true);
			r->used++;
			r->cursor = (off + 1) % r->count;
			return r->base + off;
		}
	}
	return -1;
}

bool uid_range_mark(struct uid_range *r, int64_t uid)
{
	int64_t off = uid - r->base;
	if (off < 0 || off >= r->count || taken(r, off))
		return false;
	set(r, off, true);
	r->used++;
	return true;
}

void uid_range_release(struct uid_range *r, int64_t uid)
{
	int64_t off = uid - r->base;
	if (off < 0 || off >= r->count || !taken(r, off))
		return;
	set(r, off, false);
	r->used--;
}

size_t uid_range_used(const struct uid_range *r)
{
	return r->used;
}

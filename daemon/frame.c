/* frame.c: frame prefix encoding and bounds. */
#include "frame.h"

static uint32_t get_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static void put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

int frame_parse_prefix(const unsigned char prefix[FRAME_PREFIX], uint32_t *hlen, uint32_t *blen,
		       struct err **errp)
{
	uint32_t h = get_be32(prefix), b = get_be32(prefix + 4);
	/* The smallest header is "{}". */
	if (h < 2 || h > FRAME_MAX_HEADER)
		return err_set(errp, ERR_BAD_REQUEST, "frame header length %u out of bounds", h);
	if (b > FRAME_MAX_BODY)
		return err_set(errp, ERR_BAD_REQUEST, "frame body length %u out of bounds", b);
	*hlen = h;
	*blen = b;
	return 0;
}

void frame_write_prefix(unsigned char prefix[FRAME_PREFIX], uint32_t hlen, uint32_t blen)
{
	put_be32(prefix, hlen);
	put_be32(prefix + 4, blen);
}

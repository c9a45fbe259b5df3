/* frame.h: the length-prefixed frames of the runner protocol (docs/protocol.md).
 *
 * A frame is u32 header length, u32 body length (both big-endian), a JSON
 * header and raw body bytes. Lengths are checked here, before anything is
 * buffered, so a hostile sandbox cannot make the daemon allocate. */
#ifndef CI_FRAME_H
#define CI_FRAME_H

#include <stdint.h>

#include "err.h"

#define FRAME_PREFIX 8
#define FRAME_MAX_HEADER (1u << 20)
#define FRAME_MAX_BODY (1u << 20)

/* Read the two lengths from an 8-byte prefix; -1 (bad_request) when out of bounds. */
int frame_parse_prefix(const unsigned char prefix[FRAME_PREFIX], uint32_t *hlen, uint32_t *blen,
		       struct err **errp);

/* Write the 8-byte prefix for the given lengths. */
void frame_write_prefix(unsigned char prefix[FRAME_PREFIX], uint32_t hlen, uint32_t blen);

#endif

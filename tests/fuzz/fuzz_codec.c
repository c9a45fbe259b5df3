/* fuzz_codec.c: base64 decoding (ci-ctl reads display data from the server
 * with it) must refuse or accept any text without crashing or passing its
 * cap, and what it accepts must survive an encode and decode unchanged;
 * percent-encoding must give only URL-safe characters. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "buf.h"
#include "codec.h"
#include "xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	AUTOFREE char *text = xstrndup((const char *)data, size);
	struct buf out, again;
	buf_init(&out, 4096);
	buf_init(&again, 4096);
	if (codec_base64_decode(text, &out) == 0) {
		AUTOFREE char *enc =
		    codec_base64_encode((const unsigned char *)(out.data ? out.data : ""), out.len);
		if (codec_base64_decode(enc, &again) != 0 || again.len != out.len ||
		    (out.len > 0 && memcmp(again.data, out.data, out.len) != 0))
			__builtin_trap(); /* the round trip changed the bytes */
	}
	if (out.len > out.max)
		__builtin_trap();
	buf_release(&out);
	buf_release(&again);

	AUTOFREE char *esc = codec_url_escape(text, size > 0 && data[0] & 1);
	if (strspn(esc, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~%/") !=
	    strlen(esc))
		__builtin_trap();
	return 0;
}

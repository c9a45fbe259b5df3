/* fuzz_config.c: a config file is read by an operator's hand but must never
 * crash the daemon. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "config.h"
#include "xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 65536)
		return 0;
	char *text = xmalloc(size + 1);
	memcpy(text, data, size);
	text[size] = '\0';
	struct config cfg;
	config_defaults(&cfg);
	struct err *e = NULL;
	if (config_apply_text(&cfg, text, "fuzz", &e) == 0)
		config_validate(&cfg, &e);
	err_free(e);
	config_free(&cfg);
	free(text);
	return 0;
}

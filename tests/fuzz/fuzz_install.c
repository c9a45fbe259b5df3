/* fuzz_install.c: the install script's report, read from a sandbox's stdout
 * (install_parse_report), and a requirement as a client sends it
 * (install_check_spec). Whatever the bytes: the package list stays within
 * its cap, every name and version is of the accepted shape, the status is
 * one of the three words or empty, and a spec that passes has none of the
 * characters that would let it out of its Python string or be an option. */
#include <stdlib.h>
#include <string.h>

#include "install.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct install_result r = {0};
	char status[16];
	int rc;
	install_parse_report((const char *)data, size, &r, status, sizeof(status), &rc);
	if (r.n_pkgs > INSTALL_MAX_PKGS)
		abort();
	for (size_t i = 0; i < r.n_pkgs; i++)
		if (strlen(r.pkgs[i].name) == 0 || strlen(r.pkgs[i].name) > INSTALL_NAME_MAX ||
		    strpbrk(r.pkgs[i].name, "\"'\\\n\t ") || strlen(r.pkgs[i].version) == 0 ||
		    strlen(r.pkgs[i].version) > INSTALL_VERSION_MAX ||
		    strpbrk(r.pkgs[i].version, "\"'\\\n\t "))
			abort();
	if (status[0] && strcmp(status, "ok") && strcmp(status, "timeout") &&
	    strcmp(status, "failed"))
		abort();
	install_result_release(&r);

	char *spec = malloc(size + 1);
	memcpy(spec, data, size);
	spec[size] = '\0';
	struct err *e = NULL;
	if (install_check_spec(spec, &e) == 0 &&
	    (spec[0] == '-' || strpbrk(spec, "\"'\\ \n\t;@[/:") || strlen(spec) > INSTALL_SPEC_MAX))
		abort();
	err_free(e);
	free(spec);
	return 0;
}

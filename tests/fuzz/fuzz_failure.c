/* fuzz_failure.c: what the sandbox sends (an exception's name, message and
 * traceback) and the user's code, through failure_classify,
 * failure_signature and fix_rules_apply: no crash, a valid signature, the
 * parts within their caps, a repair's code as long as it says. The input
 * is split at NUL bytes: ename, evalue, code, then traceback lines. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "failure_sig.h"
#include "fix_rules.h"
#include "xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	AUTOFREE char *buf = xmalloc(size + 1);
	memcpy(buf, data, size);
	buf[size] = '\0';
	char *parts[16] = {0};
	size_t n = 0;
	for (char *p = buf; n < 16 && p <= buf + size; p += strlen(p) + 1)
		parts[n++] = p;
	struct exec_result r;
	memset(&r, 0, sizeof(r));
	r.status = size % 4 == 0 ? EXEC_ERROR : (enum exec_status)(size % 4);
	r.has_error = n > 1;
	r.ename = parts[0];
	r.evalue = n > 1 ? parts[1] : NULL;
	r.reason = parts[0];
	const char *code = n > 2 ? parts[2] : "";
	r.traceback = n > 3 ? parts + 3 : NULL;
	r.n_traceback = n > 3 ? n - 3 : 0;
	const char *files[] = {"data/Sales.csv", "notes.txt", n > 4 ? parts[4] : "x"};
	struct failure_input in = {.r = &r,
				   .code = code,
				   .code_len = strlen(code),
				   .image = "python",
				   .timeout_at_max = size & 1,
				   .memory_at_max = size & 2,
				   .can_install = size & 4};
	(void)failure_class_name(failure_classify(&in));
	char sig[FAILURE_SIG_HEX + 1];
	struct failure_desc d;
	failure_signature(&in, sig, &d);
	if (!failure_sig_valid(sig) || strlen(d.message) > 1024 || strlen(d.line) > 512 ||
	    strlen(d.ename) > 128)
		__builtin_trap();
	failure_desc_clear(&d);
	struct fix_rule_input fin = {
	    .r = &r, .code = code, .code_len = strlen(code), .files = files, .n_files = 3};
	struct fix_rule_outcome o;
	fix_rules_apply(&fin, &o);
	if (o.kind == FIX_RULE_REPAIR && (o.code == NULL || strlen(o.code) != o.code_len))
		__builtin_trap();
	fix_rule_outcome_clear(&o);
	return 0;
}

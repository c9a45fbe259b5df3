/* kernel_frame.c: the headers of the frames a sandbox sends, checked. */
#include "kernel_frame.h"

#include <string.h>

#include "json.h"

/* The requirements of a pip_open: kept as given (borrowed), or bad says
 * why not. Never a protocol error: the cell hears what is wrong. */
static void decode_pip_specs(struct kernel_pip *p, yajl_val specs)
{
	if (specs == NULL || !YAJL_IS_ARRAY(specs)) {
		p->bad = "specs is not a list of requirements";
		return;
	}
	size_t n = specs->u.array.len;
	if (n > KERNEL_PIP_MAX_SPECS) {
		p->bad = "more than 32 requirements in one install";
		return;
	}
	for (size_t i = 0; i < n; i++) {
		yajl_val v = specs->u.array.values[i];
		if (!YAJL_IS_STRING(v)) {
			p->bad = "a requirement that is not a string";
			p->n_specs = 0;
			return;
		}
		p->specs[p->n_specs++] = v->u.string;
	}
}

static int decode_kernel(struct kernel_frame *f, const char *t, struct err **errp)
{
	yajl_val h = f->header;
	int64_t id = 0;
	if (!json_get_int(h, "id", &id) || id <= 0)
		return err_set(errp, ERR_BAD_REQUEST, "a kernel frame without an id > 0");
	f->id = (uint64_t)id;
	if (strcmp(t, "stream") == 0) {
		const char *name = json_get_str(h, "name");
		if (name == NULL || (strcmp(name, "stdout") && strcmp(name, "stderr")))
			return err_set(errp, ERR_BAD_REQUEST, "a stream frame of no known stream");
		f->kind = KERNEL_FRAME_STREAM;
		f->is_stderr = strcmp(name, "stderr") == 0;
		yajl_val tail = json_get(h, "tail");
		f->tail = tail && YAJL_IS_TRUE(tail);
		int64_t dropped = 0;
		json_get_int(h, "dropped", &dropped);
		f->dropped = dropped > 0 ? (uint64_t)dropped : 0;
	} else if (strcmp(t, "display") == 0) {
		f->mime = json_get_str(h, "mime");
		if (f->mime == NULL)
			return err_set(errp, ERR_BAD_REQUEST,
				       "a display frame without a mime type");
		f->kind = KERNEL_FRAME_DISPLAY;
		f->display.mime = f->mime;
		int64_t group = -1;
		if (!json_get_int(h, "group", &group) || group < 0)
			group = -1;
		f->display.group = group;
		yajl_val result = json_get(h, "result");
		f->display.result = result && YAJL_IS_TRUE(result);
	} else if (strcmp(t, "done") == 0) {
		f->kind = KERNEL_FRAME_DONE;
	} else if (strcmp(t, "pip_open") == 0) {
		f->kind = KERNEL_FRAME_PIP_OPEN;
		decode_pip_specs(&f->pip, json_get(h, "specs"));
	} else if (strcmp(t, "pip_close") == 0) {
		f->kind = KERNEL_FRAME_PIP_CLOSE;
		int64_t rc = -1;
		if (!json_get_int(h, "rc", &rc) || rc < -1000 || rc > 1000)
			rc = -1;
		f->pip.rc = (int)rc;
	} else {
		f->kind = KERNEL_FRAME_IGNORED; /* a newer runner may say more */
	}
	return 0;
}

static int decode(enum kernel_frame_from from, struct kernel_frame *f, struct err **errp)
{
	yajl_val h = f->header;
	const char *t = json_get_str(h, "t");
	if (t == NULL)
		return err_set(errp, ERR_BAD_REQUEST, "a frame without a type (t)");
	switch (from) {
	case KERNEL_FRAME_FROM_PENDING:
		f->role = json_get_str(h, "role");
		if (strcmp(t, "hello") != 0 || f->role == NULL ||
		    (strcmp(f->role, "kernel") && strcmp(f->role, "supervisor")))
			return err_set(errp, ERR_BAD_REQUEST,
				       "expected a hello from a kernel or a supervisor");
		f->kind = KERNEL_FRAME_HELLO;
		return 0;
	case KERNEL_FRAME_FROM_KERNEL: return decode_kernel(f, t, errp);
	case KERNEL_FRAME_FROM_SUPERVISOR:
		if (strcmp(t, "kernel_exit") != 0) {
			f->kind = KERNEL_FRAME_SUPERVISOR;
			return 0;
		}
		f->kind = KERNEL_FRAME_KERNEL_EXIT;
		int64_t code = -1, sig = -1;
		json_get_int(h, "code", &code);
		json_get_int(h, "signal", &sig);
		f->code = (int)code;
		f->sig = (int)sig;
		yajl_val oom = json_get(h, "oom");
		f->oom = oom && YAJL_IS_TRUE(oom);
		return 0;
	}
	return err_set(errp, ERR_BAD_REQUEST, "a frame from an unknown peer");
}

int kernel_frame_decode(enum kernel_frame_from from, const char *hdr, size_t hlen,
			struct kernel_frame *f, struct err **errp)
{
	memset(f, 0, sizeof(*f));
	f->header = json_parse(hdr, hlen, errp);
	if (f->header == NULL)
		return -1;
	if (decode(from, f, errp) < 0) {
		kernel_frame_clear(f);
		return -1;
	}
	return 0;
}

void kernel_frame_clear(struct kernel_frame *f)
{
	if (f->header)
		yajl_tree_free(f->header);
	memset(f, 0, sizeof(*f));
}

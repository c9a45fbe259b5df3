/* exec_result.c: assembling and serialising an execution's result. */
#include "exec_result.h"

#include <string.h>

#include "codec.h"
#include "json.h"
#include "xalloc.h"

#define RESULT_TEXT_CAP (256 * 1024)

static const char *const status_names[] = {
    [EXEC_OK] = "ok", [EXEC_ERROR] = "error", [EXEC_TIMEOUT] = "timeout", [EXEC_KILLED] = "killed"};

const char *exec_status_name(enum exec_status st)
{
	return status_names[st];
}

struct exec_result *exec_result_new(size_t output_cap)
{
	struct exec_result *r = xcalloc(1, sizeof(*r));
	capbuf_init(&r->out, output_cap);
	capbuf_init(&r->err, output_cap);
	return r;
}

void exec_result_free(struct exec_result *r)
{
	if (r == NULL)
		return;
	capbuf_release(&r->out);
	capbuf_release(&r->err);
	free(r->chunks);
	free(r->result);
	free(r->ename);
	free(r->evalue);
	for (size_t i = 0; i < r->n_traceback; i++)
		free(r->traceback[i]);
	free(r->traceback);
	for (size_t i = 0; i < r->n_display; i++) {
		free(r->display[i].mime);
		free(r->display[i].b64);
	}
	free(r->display);
	for (size_t i = 0; i < r->n_files; i++) {
		free(r->files[i].path);
		free(r->files[i].change);
	}
	free(r->files);
	free(r->reason);
	free(r->cell_text);
	free(r);
}

static char *dup_str(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

static void dup_capbuf(struct capbuf *to, const struct capbuf *from)
{
	*to = *from;
	to->head = from->head ? xmalloc(from->head_len + 1) : NULL;
	if (to->head)
		memcpy(to->head, from->head, from->head_len);
	to->tail = from->tail ? xmalloc(from->tail_len + 1) : NULL;
	if (to->tail)
		memcpy(to->tail, from->tail, from->tail_len);
}

struct exec_result *exec_result_dup(const struct exec_result *r)
{
	struct exec_result *d = xmalloc(sizeof(*d));
	*d = *r; /* the scalars; every pointer is replaced below */
	dup_capbuf(&d->out, &r->out);
	dup_capbuf(&d->err, &r->err);
	d->chunks = r->n_chunks ? xcalloc(r->n_chunks, sizeof(*d->chunks)) : NULL;
	if (r->n_chunks)
		memcpy(d->chunks, r->chunks, r->n_chunks * sizeof(*d->chunks));
	d->result = dup_str(r->result);
	d->ename = dup_str(r->ename);
	d->evalue = dup_str(r->evalue);
	d->reason = dup_str(r->reason);
	d->cell_text = dup_str(r->cell_text);
	d->traceback = r->n_traceback ? xcalloc(r->n_traceback, sizeof(char *)) : NULL;
	for (size_t i = 0; i < r->n_traceback; i++)
		d->traceback[i] = dup_str(r->traceback[i]);
	d->display = r->n_display ? xcalloc(r->n_display, sizeof(*d->display)) : NULL;
	for (size_t i = 0; i < r->n_display; i++) {
		d->display[i].mime = dup_str(r->display[i].mime);
		d->display[i].b64 = dup_str(r->display[i].b64);
		d->display[i].group = r->display[i].group;
		d->display[i].result = r->display[i].result;
	}
	d->files = r->n_files ? xcalloc(r->n_files, sizeof(*d->files)) : NULL;
	for (size_t i = 0; i < r->n_files; i++) {
		d->files[i].path = dup_str(r->files[i].path);
		d->files[i].size = r->files[i].size;
		d->files[i].change = dup_str(r->files[i].change);
	}
	return d;
}

void exec_result_drop_outputs(struct exec_result *r)
{
	if (r == NULL)
		return;
	size_t cap = r->out.cap;
	capbuf_release(&r->out);
	capbuf_release(&r->err);
	capbuf_init(&r->out, cap);
	capbuf_init(&r->err, cap);
	free(r->chunks);
	r->chunks = NULL;
	r->n_chunks = 0;
	r->chunks_full = false;
	free(r->result);
	r->result = NULL;
	for (size_t i = 0; i < r->n_display; i++) {
		free(r->display[i].mime);
		free(r->display[i].b64);
	}
	free(r->display);
	r->display = NULL;
	r->n_display = 0;
	r->display_bytes = 0;
	for (size_t i = 0; i < r->n_files; i++) {
		free(r->files[i].path);
		free(r->files[i].change);
	}
	free(r->files);
	r->files = NULL;
	r->n_files = 0;
}

/* kept live bytes of a stream, in arrival order: the kernel forwards each
 * stream's bytes before the other's next ones (docs/protocol.md), so the
 * arrival order is the order written. */
static void note_chunk(struct exec_result *r, bool is_stderr, size_t kept)
{
	if (!r->chunks_full && r->n_chunks && r->chunks[r->n_chunks - 1].is_stderr == is_stderr) {
		r->chunks[r->n_chunks - 1].len += kept;
		return;
	}
	if (r->chunks_full || r->n_chunks >= EXEC_MAX_OUTPUT_CHUNKS) {
		r->chunks_full = true;
		return;
	}
	r->chunks = xrealloc(r->chunks, (r->n_chunks + 1) * sizeof(*r->chunks));
	r->chunks[r->n_chunks++] = (struct exec_chunk){.is_stderr = is_stderr, .len = kept};
}

size_t exec_result_on_stream(struct exec_result *r, bool is_stderr, const char *data, size_t len,
			     bool tail, uint64_t dropped)
{
	struct capbuf *cb = is_stderr ? &r->err : &r->out;
	if (tail) {
		capbuf_set_tail(cb, data, len, dropped);
		return len;
	}
	size_t kept = capbuf_append(cb, data, len);
	if (kept > 0)
		note_chunk(r, is_stderr, kept);
	return kept;
}

bool exec_result_on_display(struct exec_result *r, const struct exec_display_info *info,
			    const char *data, size_t len)
{
	if (r->n_display >= EXEC_MAX_DISPLAY || len > EXEC_MAX_DISPLAY_BYTES - r->display_bytes)
		return false;
	r->display_bytes += len;
	r->display = xrealloc(r->display, (r->n_display + 1) * sizeof(*r->display));
	struct exec_display *d = &r->display[r->n_display];
	d->mime = xstrndup(info->mime, 128);
	d->b64 = codec_base64_encode((const unsigned char *)data, len);
	d->group = info->group >= 0 ? info->group : (int64_t)r->n_display;
	d->result = info->result;
	r->n_display++;
	return true;
}

static char *capped_strdup(const char *s, size_t cap)
{
	size_t n = strlen(s);
	return xstrndup(s, n < cap ? n : cap);
}

/* Calls fn on each line of the traceback's items: an item may hold several
 * lines (a frame and its source line); one trailing newline ends an item. */
static size_t each_traceback_line(yajl_val tb, void (*fn)(const char *, size_t, void *), void *arg)
{
	size_t n = 0;
	for (size_t i = 0; i < tb->u.array.len; i++) {
		yajl_val item = tb->u.array.values[i];
		if (!YAJL_IS_STRING(item))
			continue;
		const char *s = item->u.string, *end = s + strlen(s);
		if (end > s && end[-1] == '\n')
			end--;
		for (;;) {
			const char *nl = memchr(s, '\n', (size_t)(end - s));
			const char *stop = nl ? nl : end;
			if (fn)
				fn(s, (size_t)(stop - s), arg);
			n++;
			if (nl == NULL)
				break;
			s = nl + 1;
		}
	}
	return n;
}

struct tb_keep {
	struct exec_result *r;
	size_t seen, total;
};

/* The first EXEC_TRACEBACK_HEAD lines, a marker, the last EXEC_TRACEBACK_TAIL:
 * a deep recursion's thousands of frames cannot blow the result. */
static void keep_traceback_line(const char *s, size_t len, void *arg)
{
	struct tb_keep *k = arg;
	struct exec_result *r = k->r;
	size_t i = k->seen++;
	bool cut = k->total > EXEC_TRACEBACK_HEAD + EXEC_TRACEBACK_TAIL;
	if (cut && i == EXEC_TRACEBACK_HEAD)
		r->traceback[r->n_traceback++] =
		    xasprintf("[... %zu traceback lines omitted ...]",
			      k->total - EXEC_TRACEBACK_HEAD - EXEC_TRACEBACK_TAIL);
	if (cut && i >= EXEC_TRACEBACK_HEAD && i < k->total - EXEC_TRACEBACK_TAIL)
		return;
	r->traceback[r->n_traceback++] = xstrndup(s, len < 16 * 1024 ? len : 16 * 1024);
}

/* The traceback, one line per entry (docs/api.md), capped. */
static void take_traceback(struct exec_result *r, yajl_val tb)
{
	struct tb_keep k = {.r = r, .total = each_traceback_line(tb, NULL, NULL)};
	if (k.total == 0)
		return;
	r->traceback = xcalloc(EXEC_TRACEBACK_HEAD + 1 + EXEC_TRACEBACK_TAIL, sizeof(char *));
	each_traceback_line(tb, keep_traceback_line, &k);
}

static int take_error(struct exec_result *r, yajl_val e, struct err **errp)
{
	if (!YAJL_IS_OBJECT(e))
		return err_set(errp, ERR_BAD_REQUEST, "done.error: expected an object");
	const char *ename = json_get_str(e, "ename"), *evalue = json_get_str(e, "evalue");
	r->has_error = true;
	r->ename = capped_strdup(ename ? ename : "Error", 1024);
	r->evalue = capped_strdup(evalue ? evalue : "", 64 * 1024);
	yajl_val tb = json_get(e, "traceback");
	if (tb && YAJL_IS_ARRAY(tb))
		take_traceback(r, tb);
	return 0;
}

static void take_files(struct exec_result *r, yajl_val files)
{
	size_t n = files->u.array.len;
	if (n > EXEC_MAX_FILES) {
		n = EXEC_MAX_FILES;
		r->files_truncated = true;
	}
	r->files = xcalloc(n, sizeof(*r->files));
	for (size_t i = 0; i < n; i++) {
		yajl_val f = files->u.array.values[i];
		const char *path = json_get_str(f, "path"), *change = json_get_str(f, "change");
		int64_t size = 0;
		json_get_int(f, "size", &size);
		if (path == NULL || change == NULL ||
		    (strcmp(change, "created") && strcmp(change, "modified") &&
		     strcmp(change, "deleted")))
			continue;
		r->files[r->n_files].path = capped_strdup(path, 4096);
		r->files[r->n_files].change = xstrdup(change);
		r->files[r->n_files].size = size;
		r->n_files++;
	}
}

/* The runner's names for why it walked (ci_watch.py); anything else from a
 * container is dropped, not echoed to the client. */
static const char *const files_fallbacks[] = {"overflow", "unwatched", "too_many_files",
					      "no_inotify"};

static const char *known_fallback(const char *s)
{
	for (size_t i = 0; s && i < sizeof(files_fallbacks) / sizeof(files_fallbacks[0]); i++)
		if (strcmp(s, files_fallbacks[i]) == 0)
			return files_fallbacks[i];
	return NULL;
}

int exec_result_on_done(struct exec_result *r, yajl_val done, struct err **errp)
{
	const char *status = json_get_str(done, "status");
	if (status == NULL || (strcmp(status, "ok") && strcmp(status, "error")))
		return err_set(errp, ERR_BAD_REQUEST, "done: status must be \"ok\" or \"error\"");
	r->status = strcmp(status, "ok") == 0 ? EXEC_OK : EXEC_ERROR;
	const char *result = json_get_str(done, "result");
	if (result)
		r->result = capped_strdup(result, RESULT_TEXT_CAP);
	yajl_val e = json_get(done, "error");
	if (e && !YAJL_IS_NULL(e) && take_error(r, e, errp) < 0)
		return -1;
	if (r->status == EXEC_ERROR && !r->has_error) {
		r->has_error = true;
		r->ename = xstrdup("Error");
		r->evalue = xstrdup("");
	}
	yajl_val files = json_get(done, "files");
	if (files && YAJL_IS_ARRAY(files))
		take_files(r, files);
	yajl_val ft = json_get(done, "files_truncated");
	if (ft && YAJL_IS_TRUE(ft))
		r->files_truncated = true;
	r->files_fallback = known_fallback(json_get_str(done, "files_fallback"));
	return 0;
}

void exec_result_fail(struct exec_result *r, enum exec_status status, bool kernel_restarted,
		      const char *reason)
{
	if (kernel_restarted) {
		capbuf_producer_died(&r->out);
		capbuf_producer_died(&r->err);
	}
	r->status = status;
	r->kernel_restarted = kernel_restarted;
	free(r->reason);
	r->reason = reason ? xstrdup(reason) : NULL;
}

static void output_to_json(yajl_gen g, const char *key, const struct capbuf *cb)
{
	size_t len;
	char *text = capbuf_render(cb, &len);
	jg_str(g, key);
	jg_strn(g, text, len);
	free(text);
}

static void chunk_to_json(yajl_gen g, bool is_stderr, const char *text, size_t len)
{
	jg_obj(g);
	jg_kv_str(g, "stream", is_stderr ? "stderr" : "stdout");
	jg_str(g, "text");
	jg_strn(g, text, len);
	jg_obj_end(g);
}

/* Whether "output" is not the whole output in order: the chunk cap stopped
 * it, or a stream went past its live half (the rest came as a tail, whose
 * order against the other stream's is not known), or bytes were cut. */
static bool output_cut(const struct exec_result *r)
{
	return r->chunks_full || r->out.truncated || r->err.truncated || r->out.tail_len ||
	       r->err.tail_len;
}

/* "output": the live chunks in order, then each stream's tail (stdout's,
 * then stderr's) when there is one. */
static void output_list_to_json(yajl_gen g, const struct exec_result *r)
{
	jg_str(g, "output");
	jg_arr(g);
	size_t at[2] = {0, 0};
	for (size_t i = 0; i < r->n_chunks; i++) {
		const struct exec_chunk *ch = &r->chunks[i];
		const struct capbuf *cb = ch->is_stderr ? &r->err : &r->out;
		size_t *off = &at[ch->is_stderr];
		size_t len = ch->len <= cb->head_len - *off ? ch->len : cb->head_len - *off;
		chunk_to_json(g, ch->is_stderr, cb->head + *off, len);
		*off += len;
	}
	if (r->out.tail_len)
		chunk_to_json(g, false, r->out.tail, r->out.tail_len);
	if (r->err.tail_len)
		chunk_to_json(g, true, r->err.tail, r->err.tail_len);
	jg_arr_end(g);
	jg_kv_bool(g, "output_truncated", output_cut(r));
}

void exec_display_members(const struct exec_display *d, yajl_gen g)
{
	jg_kv_str(g, "mime", d->mime);
	jg_kv_str(g, "data", d->b64);
	jg_kv_int(g, "group", d->group);
	jg_kv_bool(g, "result", d->result);
}

void exec_display_to_json(const struct exec_display *d, yajl_gen g)
{
	jg_obj(g);
	exec_display_members(d, g);
	jg_obj_end(g);
}

/* ---- the line of the cell ---- */

static bool digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Digits at s (at most 9 of them); -1 when there are none or more. */
static long small_number(const char *s, const char **end)
{
	long v = 0;
	int n = 0;
	while (digit(*s) && n < 9) {
		v = v * 10 + (*s - '0');
		s++;
		n++;
	}
	*end = s;
	return n == 0 || digit(*s) ? -1 : v;
}

long exec_result_cell_frame(const struct exec_result *r)
{
	static const char mark[] = "File \"<cell-";
	long best_cell = -1, line = 0;
	for (size_t i = 0; r && i < r->n_traceback; i++) {
		const char *t = r->traceback[i];
		for (const char *p = t ? strstr(t, mark) : NULL; p; p = strstr(p + 1, mark)) {
			const char *q;
			long cell = small_number(p + sizeof(mark) - 1, &q);
			if (cell < 0 || strncmp(q, ">\", line ", 9) != 0)
				continue;
			long l = small_number(q + 9, &q);
			if (l <= 0 || cell < best_cell)
				continue;
			best_cell = cell;
			line = l;
		}
	}
	return line;
}

const char *exec_code_line(const char *code, size_t len, long l, size_t *n)
{
	const char *p = code, *end = code + len;
	if (code == NULL || l <= 0)
		return NULL;
	for (long i = 1; i < l; i++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		if (nl == NULL)
			return NULL;
		p = nl + 1;
	}
	if (p >= end && l > 1)
		return NULL;
	const char *nl = memchr(p, '\n', (size_t)(end - p));
	*n = (size_t)((nl ? nl : end) - p);
	return p;
}

void exec_result_set_cell_line(struct exec_result *r, const char *code, size_t len)
{
	if (r == NULL || !r->has_error || code == NULL)
		return;
	long l = exec_result_cell_frame(r);
	size_t n = 0;
	const char *line = l > 0 ? exec_code_line(code, len, l, &n) : NULL;
	if (line == NULL)
		return;
	if (n > 0 && line[n - 1] == '\r')
		n--;
	if (n > EXEC_CELL_TEXT_MAX) { /* back up to the start of a UTF-8 sequence */
		n = EXEC_CELL_TEXT_MAX;
		while (n > 0 && ((unsigned char)line[n] & 0xC0) == 0x80)
			n--;
	}
	free(r->cell_text);
	r->cell_line = l;
	r->cell_text = xstrndup(line, n);
}

void exec_cell_line_json(const struct exec_result *r, yajl_gen g)
{
	jg_str(g, "cell_line");
	if (r->cell_line > 0 && r->cell_text) {
		jg_obj(g);
		jg_kv_int(g, "line", r->cell_line);
		jg_kv_str(g, "text", r->cell_text);
		jg_obj_end(g);
	} else {
		jg_null(g);
	}
}

void exec_result_to_json(const struct exec_result *r, yajl_gen g)
{
	jg_obj(g);
	jg_kv_str(g, "status", exec_status_name(r->status));
	output_to_json(g, "stdout", &r->out);
	output_to_json(g, "stderr", &r->err);
	jg_kv_bool(g, "stdout_truncated", r->out.truncated);
	jg_kv_bool(g, "stderr_truncated", r->err.truncated);
	output_list_to_json(g, r);
	jg_kv_str(g, "result", r->result);
	jg_str(g, "error");
	if (r->has_error) {
		jg_obj(g);
		jg_kv_str(g, "ename", r->ename);
		jg_kv_str(g, "evalue", r->evalue);
		jg_str(g, "traceback");
		jg_arr(g);
		for (size_t i = 0; i < r->n_traceback; i++)
			jg_str(g, r->traceback[i]);
		jg_arr_end(g);
		exec_cell_line_json(r, g);
		jg_obj_end(g);
	} else {
		jg_null(g);
	}
	jg_str(g, "display");
	jg_arr(g);
	for (size_t i = 0; i < r->n_display; i++)
		exec_display_to_json(&r->display[i], g);
	jg_arr_end(g);
	jg_str(g, "files");
	jg_arr(g);
	for (size_t i = 0; i < r->n_files; i++) {
		jg_obj(g);
		jg_kv_str(g, "path", r->files[i].path);
		jg_kv_int(g, "size", r->files[i].size);
		jg_kv_str(g, "change", r->files[i].change);
		jg_obj_end(g);
	}
	jg_arr_end(g);
	jg_kv_bool(g, "files_truncated", r->files_truncated);
	jg_kv_str(g, "files_fallback", r->files_fallback);
	jg_kv_int(g, "duration_ms", r->duration_ms);
	jg_kv_str(g, "kernel", r->kernel_restarted ? "restarted" : "preserved");
	jg_kv_str(g, "reason", r->reason);
	jg_obj_end(g);
}

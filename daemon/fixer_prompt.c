/* fixer_prompt.c: what the fixer model is sent and what is taken from its
 * answer (fixer.h's pure half, for the unit tests and the fuzzer).
 *
 * The prompt is bounded whatever failed: each part has its own cap (the
 * code's head, the traceback's last lines, the output's tails, the first
 * variables and files), so a run that printed a gigabyte or defined a
 * million names still sends a prompt of a few hundred KiB at most. What is
 * cut says so, so the model knows it is not seeing everything. */
#include "fixer.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "json.h"
#include "xalloc.h"

#define PROMPT_CODE_MAX (64 * 1024)
#define PROMPT_GOAL_MAX (8 * 1024)
#define PROMPT_ERROR_MAX (4 * 1024)
#define PROMPT_TB_LINES 60
#define PROMPT_TB_LINE_MAX 1024
#define PROMPT_TAIL_MAX (4 * 1024)
#define PROMPT_VARS_MAX 200
#define PROMPT_FILES_MAX 200
#define PROMPT_NAME_MAX 256
/* A DataFrame's columns: at most this many per frame, each name and dtype
 * cut, and this many in all (a session of many wide frames). */
#define PROMPT_COLS_MAX 50
#define PROMPT_COLS_TOTAL 500
#define PROMPT_COL_NAME_MAX 100
#define PROMPT_DTYPE_MAX 64
/* Far above the sum of the caps; a guard, never reached. */
#define PROMPT_TEXT_MAX (1024 * 1024)

static const char fixer_system[] =
    "You repair Python code that failed in a sandboxed, stateful Python session. "
    "You are given what the code was for (the goal, when known), the code, the error "
    "and its traceback, the end of its output, the variables defined in the session "
    "(name and type; for a DataFrame its shape and its columns with their dtypes, for "
    "an array its shape and dtype) and the files in its working directory. "
    "Answer with the whole corrected program in one ```python fenced code block, "
    "with nothing after the block. Keep the program's purpose; change only what is "
    "needed to fix the error. Do not add network access or package installation.";

static void add(struct buf *b, const char *s, size_t n)
{
	(void)buf_append(b, s, n); /* the caps keep it under PROMPT_TEXT_MAX */
}

static void adds(struct buf *b, const char *s)
{
	add(b, s, strlen(s));
}

/* The first max bytes of s, and a note of how much was cut. */
static void add_head(struct buf *b, const char *s, size_t len, size_t max)
{
	add(b, s, len < max ? len : max);
	if (len > max) {
		char note[80];
		snprintf(note, sizeof(note), "\n[... %zu more bytes cut ...]", len - max);
		adds(b, note);
	}
}

/* The last max bytes of s, and a note of how much was cut before. */
static void add_tail(struct buf *b, const char *s, size_t max)
{
	size_t len = strlen(s);
	if (len > max) {
		char note[80];
		snprintf(note, sizeof(note), "[... %zu earlier bytes cut ...]\n", len - max);
		adds(b, note);
		s += len - max;
		len = max;
	}
	add(b, s, len);
}

struct tb_line {
	const char *p;
	size_t len;
};

/* The traceback's last PROMPT_TB_LINES lines (an entry may hold several),
 * each cut to PROMPT_TB_LINE_MAX bytes. */
static void add_traceback(struct buf *b, const char *const *tb, size_t n)
{
	struct tb_line lines[PROMPT_TB_LINES];
	size_t got = 0; /* filled from the end of lines[] */
	bool more = false;
	for (size_t i = n; i-- > 0 && !more;) {
		const char *s = tb[i] ? tb[i] : "";
		size_t end = strlen(s);
		while (end > 0 && s[end - 1] == '\n')
			end--;
		for (;;) {
			size_t start = end;
			while (start > 0 && s[start - 1] != '\n')
				start--;
			if (got == PROMPT_TB_LINES) {
				more = true;
				break;
			}
			got++;
			lines[PROMPT_TB_LINES - got] = (struct tb_line){s + start, end - start};
			if (start == 0)
				break;
			end = start - 1;
		}
	}
	if (more)
		adds(b, "[... earlier lines cut ...]\n");
	for (size_t i = PROMPT_TB_LINES - got; i < PROMPT_TB_LINES; i++) {
		size_t l = lines[i].len < PROMPT_TB_LINE_MAX ? lines[i].len : PROMPT_TB_LINE_MAX;
		add(b, lines[i].p, l);
		adds(b, "\n");
	}
}

/* s on one line, at most max bytes (cut on a UTF-8 boundary). */
static void add_capped(struct buf *b, const char *s, size_t max)
{
	s = s ? s : "";
	size_t len = strnlen(s, max + 1);
	bool cut = len > max;
	if (cut) {
		len = max;
		while (len > 0 && ((unsigned char)s[len] & 0xC0) == 0x80)
			len--;
	}
	/* A name is one line of the list: a newline in it would forge another. */
	for (size_t i = 0; i < len; i++)
		add(b, s[i] == '\n' || s[i] == '\r' ? " " : &s[i], 1);
	if (cut)
		adds(b, "...");
}

static void add_name(struct buf *b, const char *s)
{
	add_capped(b, s, PROMPT_NAME_MAX);
}

/* A DataFrame's columns, as many as its share of the budget allows. */
static void add_columns(struct buf *b, const struct fixer_var *v, size_t *budget)
{
	size_t n = v->n_cols < PROMPT_COLS_MAX ? v->n_cols : PROMPT_COLS_MAX;
	if (n > *budget)
		n = *budget;
	*budget -= n;
	size_t total = v->cols_total > 0 && (uint64_t)v->cols_total > v->n_cols
			   ? (size_t)v->cols_total
			   : v->n_cols;
	char head[80];
	snprintf(head, sizeof(head), "\n  %zu column%s (name: dtype): ", total,
		 total == 1 ? "" : "s");
	adds(b, head);
	for (size_t i = 0; i < n; i++) {
		if (i)
			adds(b, ", ");
		add_capped(b, v->col_names ? v->col_names[i] : NULL, PROMPT_COL_NAME_MAX);
		adds(b, ": ");
		add_capped(b, v->col_types ? v->col_types[i] : NULL, PROMPT_DTYPE_MAX);
	}
	if (total > n) {
		char more[64];
		snprintf(more, sizeof(more), "%s[... and %zu more]", n ? ", " : "", total - n);
		adds(b, more);
	}
}

static void add_var_detail(struct buf *b, const struct fixer_var *v, size_t *budget)
{
	add_name(b, v->name);
	adds(b, ": ");
	add_name(b, v->type);
	if (v->shape && v->shape[0]) {
		adds(b, ", shape ");
		add_capped(b, v->shape, PROMPT_DTYPE_MAX);
	}
	if (v->dtype && v->dtype[0]) {
		adds(b, ", dtype ");
		add_capped(b, v->dtype, PROMPT_DTYPE_MAX);
	}
	if (v->n_cols || v->cols_total > 0)
		add_columns(b, v, budget);
}

/* The variables: the first PROMPT_VARS_MAX, one per line (a DataFrame's
 * columns on the next), and how many more there were. */
static void add_vars(struct buf *b, const struct fixer_prompt *p)
{
	size_t shown = p->n_vars < PROMPT_VARS_MAX ? p->n_vars : PROMPT_VARS_MAX;
	size_t budget = PROMPT_COLS_TOTAL;
	for (size_t i = 0; i < shown; i++) {
		adds(b, "- ");
		add_var_detail(b, &p->vars[i], &budget);
		adds(b, "\n");
	}
	if (p->n_vars > shown) {
		char note[64];
		snprintf(note, sizeof(note), "[... and %zu more]\n", p->n_vars - shown);
		adds(b, note);
	}
}

static void add_file(struct buf *b, const struct fixer_prompt *p, size_t i)
{
	add_name(b, p->files[i]);
}

/* A list of n items, one per line, the first max of them, and how many
 * more there were. */
static void add_list(struct buf *b, const struct fixer_prompt *p, size_t n, size_t max,
		     void (*item)(struct buf *, const struct fixer_prompt *, size_t))
{
	size_t shown = n < max ? n : max;
	for (size_t i = 0; i < shown; i++) {
		adds(b, "- ");
		item(b, p, i);
		adds(b, "\n");
	}
	if (n > shown) {
		char note[64];
		snprintf(note, sizeof(note), "[... and %zu more]\n", n - shown);
		adds(b, note);
	}
}

static char *user_text(const struct fixer_prompt *p, size_t *len)
{
	struct buf b;
	buf_init(&b, PROMPT_TEXT_MAX);
	if (p->goal && p->goal[0]) {
		adds(&b, "Goal:\n");
		add_head(&b, p->goal, strlen(p->goal), PROMPT_GOAL_MAX);
		adds(&b, "\n\n");
	}
	if (p->attempt > 0 && p->max_attempts > 0) {
		char line[96];
		snprintf(line, sizeof(line), "Attempt %d of %d failed.\n\n", p->attempt,
			 p->max_attempts);
		adds(&b, line);
	}
	adds(&b, "Code:\n```python\n");
	if (p->code)
		add_head(&b, p->code, p->code_len, PROMPT_CODE_MAX);
	adds(&b, "\n```\n\n");
	if (p->ename || p->evalue) {
		adds(&b, "Error: ");
		add_head(&b, p->ename ? p->ename : "", p->ename ? strlen(p->ename) : 0,
			 PROMPT_NAME_MAX);
		if (p->evalue) {
			adds(&b, ": ");
			add_head(&b, p->evalue, strlen(p->evalue), PROMPT_ERROR_MAX);
		}
		adds(&b, "\n\n");
	}
	if (p->n_traceback) {
		adds(&b, "Traceback:\n");
		add_traceback(&b, p->traceback, p->n_traceback);
		adds(&b, "\n");
	}
	if (p->stdout_tail && p->stdout_tail[0]) {
		adds(&b, "Standard output (the end):\n");
		add_tail(&b, p->stdout_tail, PROMPT_TAIL_MAX);
		adds(&b, "\n\n");
	}
	if (p->stderr_tail && p->stderr_tail[0]) {
		adds(&b, "Standard error (the end):\n");
		add_tail(&b, p->stderr_tail, PROMPT_TAIL_MAX);
		adds(&b, "\n\n");
	}
	if (p->n_vars) {
		adds(&b, "Variables in the session (name: type):\n");
		add_vars(&b, p);
		adds(&b, "\n");
	}
	if (p->n_files) {
		adds(&b, "Files in the working directory:\n");
		add_list(&b, p, p->n_files, PROMPT_FILES_MAX, add_file);
	}
	return buf_steal(&b, len);
}

static void message(yajl_gen g, const char *role, const char *text, size_t len)
{
	jg_obj(g);
	jg_kv_str(g, "role", role);
	jg_str(g, "content");
	jg_strn(g, text, len);
	jg_obj_end(g);
}

char *fixer_prompt_json(const struct fixer_target *t, const struct fixer_prompt *p, size_t *len)
{
	size_t ulen;
	AUTOFREE char *user = user_text(p, &ulen);
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_kv_str(g, "model", t->model ? t->model : "");
	jg_kv_int(g, "temperature", 0);
	jg_kv_bool(g, "stream", false);
	jg_str(g, "messages");
	jg_arr(g);
	message(g, "system", fixer_system, strlen(fixer_system));
	message(g, "user", user, ulen);
	jg_arr_end(g);
	jg_obj_end(g);
	size_t n;
	const char *text = jg_text(g, &n);
	char *out = xmalloc(n + 1);
	memcpy(out, text, n);
	out[n] = '\0';
	if (len)
		*len = n;
	return out;
}

/* A fence's info string that names Python, or none. */
static bool fence_is_python(const char *info, size_t n)
{
	while (n > 0 && (info[n - 1] == ' ' || info[n - 1] == '\t' || info[n - 1] == '\r'))
		n--;
	while (n > 0 && (*info == ' ' || *info == '\t')) {
		info++;
		n--;
	}
	return n == 0 || (n == 6 && strncasecmp(info, "python", 6) == 0) ||
	       (n == 2 && strncasecmp(info, "py", 2) == 0) ||
	       (n == 7 && strncasecmp(info, "python3", 7) == 0);
}

/* Whether the line at s (up to eol) is a closing fence: ``` and blanks. */
static bool is_closing(const char *s, const char *eol)
{
	if (eol - s < 3 || strncmp(s, "```", 3) != 0)
		return false;
	for (s += 3; s < eol; s++)
		if (*s != ' ' && *s != '\t' && *s != '\r')
			return false;
	return true;
}

/* The line after the one at line (ending at eol), or end. */
static const char *next_line(const char *eol, const char *end)
{
	return eol < end ? eol + 1 : end;
}

static const char *line_end(const char *line, const char *end)
{
	const char *eol = memchr(line, '\n', (size_t)(end - line));
	return eol ? eol : end;
}

/* The first Python (or bare) fenced block of text: a fence at the start of
 * a line, up to a closing fence at the start of a later line. A block in
 * another language (```json) is skipped whole, so its closing fence is
 * not taken for an opening one. */
static int first_block(const char *text, size_t tlen, const char **start, size_t *blen,
		       struct err **errp)
{
	const char *end = text + tlen;
	bool unclosed = false;
	for (const char *line = text; line < end && !unclosed;) {
		const char *eol = line_end(line, end);
		if (eol - line < 3 || strncmp(line, "```", 3) != 0) {
			line = next_line(eol, end);
			continue;
		}
		bool python = fence_is_python(line + 3, (size_t)(eol - line - 3));
		const char *body = next_line(eol, end), *l = body;
		while (l < end && !is_closing(l, line_end(l, end)))
			l = next_line(line_end(l, end), end);
		if (l >= end) {
			unclosed = python;
			break;
		}
		if (python) {
			size_t n = (size_t)(l - body);
			if (n > 0 && body[n - 1] == '\n')
				n--;
			if (n > 0 && body[n - 1] == '\r')
				n--;
			*start = body;
			*blen = n;
			return 0;
		}
		line = next_line(line_end(l, end), end);
	}
	return err_set(errp, ERR_UNAVAILABLE,
		       unclosed ? "the fixer's answer has a code block that is never closed"
				: "the fixer's answer has no code block");
}

/* A message's text: a string, or (the newer form) an array of parts whose
 * "text" parts are joined into *joined (bounded by the answer's size). */
static const char *message_text(yajl_val content, char **joined)
{
	if (YAJL_IS_STRING(content))
		return content->u.string;
	if (!YAJL_IS_ARRAY(content))
		return NULL;
	struct buf b;
	buf_init(&b, PROMPT_TEXT_MAX * 2);
	for (size_t i = 0; i < json_arr_len(content); i++) {
		yajl_val part = json_arr_at(content, i);
		const char *type = json_get_str(part, "type");
		const char *text = json_get_str(part, "text");
		if (text && (type == NULL || strcmp(type, "text") == 0))
			(void)buf_append(&b, text, strlen(text));
	}
	*joined = buf_steal(&b, NULL);
	return *joined;
}

/* Reasoning models served by llama.cpp or vLLM may put their thinking in
 * the content, in <think>...</think> before the answer; a code block in
 * there is a draft, not the answer. Unclosed, it is all thinking. */
static const char *after_thinking(const char *content)
{
	const char *p = content + strspn(content, " \t\r\n");
	if (strncmp(p, "<think>", 7) != 0)
		return content;
	const char *end = strstr(p + 7, "</think>");
	return end ? end + 8 : p + strlen(p);
}

int fixer_reply_code(const char *body, size_t len, char **code, size_t *code_len, struct err **errp)
{
	AUTOERR struct err *perr = NULL;
	AUTOJSON yajl_val v = json_parse(body, len, &perr);
	if (v == NULL)
		return err_set(errp, ERR_UNAVAILABLE, "the fixer's answer is not JSON");
	yajl_val choices = json_get(v, "choices");
	yajl_val first = YAJL_IS_ARRAY(choices) ? json_arr_at(choices, 0) : NULL;
	if (first == NULL)
		return err_set(errp, ERR_UNAVAILABLE, "the fixer's answer has no choices");
	AUTOFREE char *joined = NULL;
	const char *content = message_text(json_path(first, "message.content"), &joined);
	if (content == NULL)
		return err_set(errp, ERR_UNAVAILABLE,
			       "the fixer's answer has no choices[0].message.content");
	content = after_thinking(content);
	const char *start = NULL;
	size_t n = 0;
	if (first_block(content, strlen(content), &start, &n, errp) < 0)
		return -1;
	bool blank = true;
	for (size_t i = 0; i < n && blank; i++)
		blank = start[i] == ' ' || start[i] == '\t' || start[i] == '\n' || start[i] == '\r';
	if (blank)
		return err_set(errp, ERR_UNAVAILABLE, "the fixer's answer has an empty code block");
	*code = xmalloc(n + 1);
	memcpy(*code, start, n);
	(*code)[n] = '\0';
	if (code_len)
		*code_len = n;
	return 0;
}

/* exec_result.h: the result of one execution, assembled from kernel frames.
 *
 * Everything in it came from the sandbox, so every part is capped here:
 * output by capbuf, displays by count, files by count, tracebacks by lines. */
#ifndef CI_EXEC_RESULT_H
#define CI_EXEC_RESULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "capbuf.h"
#include "err.h"

/* 40 entries: a figure is two (Jupyter's text/plain and image/png), so an
 * execution still shows 20 figures; their data is bounded apart (the kernel
 * keeps to the same numbers, docs/protocol.md). */
#define EXEC_MAX_DISPLAY 40
#define EXEC_MAX_DISPLAY_BYTES (20u << 20)
#define EXEC_MAX_FILES 1000
/* A traceback keeps its first and last lines, with one marker line between
 * (exec_result.c); EXEC_MAX_TRACEBACK entries in all. */
#define EXEC_TRACEBACK_HEAD 100
#define EXEC_TRACEBACK_TAIL 99
#define EXEC_MAX_TRACEBACK (EXEC_TRACEBACK_HEAD + 1 + EXEC_TRACEBACK_TAIL)
/* Switches between stdout and stderr the ordered "output" list records; a
 * program that alternates more often than this has the rest only in
 * stdout/stderr (output_truncated). */
#define EXEC_MAX_OUTPUT_CHUNKS 4096

enum exec_status { EXEC_OK, EXEC_ERROR, EXEC_TIMEOUT, EXEC_KILLED };

struct exec_display {
	char *mime;
	char *b64;
	int64_t group; /* entries of one MIME bundle (one display() call) share it */
	bool result;   /* a MIME type of the last expression's value (execute_result) */
};

/* What a display frame says besides its data (docs/protocol.md). group < 0:
 * not said (a runner before bundles): the entry is a bundle of its own. */
struct exec_display_info {
	const char *mime;
	int64_t group;
	bool result;
};

/* One run of bytes of one stream in the order written: the bytes are the
 * next len of that stream's capbuf head, so the list costs no copy. */
struct exec_chunk {
	bool is_stderr;
	size_t len;
};

struct exec_file {
	char *path;
	int64_t size;
	char *change;
};

struct exec_result {
	enum exec_status status;
	struct capbuf out, err;
	struct exec_chunk *chunks; /* the live output's order (docs/api.md "output") */
	size_t n_chunks;
	bool chunks_full; /* EXEC_MAX_OUTPUT_CHUNKS reached: the order stops there */
	char *result;
	bool has_error;
	char *ename, *evalue;
	char **traceback;
	size_t n_traceback;
	struct exec_display *display;
	size_t n_display;
	size_t display_bytes; /* the entries' data, before base64 */
	struct exec_file *files;
	size_t n_files;
	bool files_truncated;
	/* Why the runner walked /workspace for the change list instead of
	 * taking it from its inotify index ("overflow", "unwatched",
	 * "too_many_files", "no_inotify"), NULL when it did not: a static
	 * string, one of exec_files_fallbacks. */
	const char *files_fallback;
	/* error.cell_line: the innermost frame of this execution's cell (the
	 * line of the submitted code the error went through, even when it was
	 * raised inside a library); 0 and NULL when there is none. */
	long cell_line;
	char *cell_text;
	int64_t duration_ms;
	bool kernel_restarted;
	char *reason; /* why it timed out or was killed; NULL otherwise */
};

/* A new, empty result with output caps. Caller frees (exec_result_free). */
struct exec_result *exec_result_new(size_t output_cap);
void exec_result_free(struct exec_result *r);
/* A deep copy of r, for a flow that answers after r's owner has freed it.
 * Caller frees (exec_result_free). */
struct exec_result *exec_result_dup(const struct exec_result *r);

/* Free what only the full answer needs (output, displays, files, the
 * value), keeping the status, the error and its traceback, the duration
 * and the reason: an earlier attempt of a run keeps only these, so a run
 * of ten attempts holds one full result, not ten. */
void exec_result_drop_outputs(struct exec_result *r);

/* A stream frame. Returns the bytes kept (what a live stream may forward). */
size_t exec_result_on_stream(struct exec_result *r, bool is_stderr, const char *data, size_t len,
			     bool tail, uint64_t dropped);

/* One display entry's members (mime, data, group, result), into an open
 * object; or as an object of its own. */
void exec_display_members(const struct exec_display *d, yajl_gen g);
void exec_display_to_json(const struct exec_display *d, yajl_gen g);

/* A display frame; false when over the display cap (dropped). */
bool exec_result_on_display(struct exec_result *r, const struct exec_display_info *info,
			    const char *data, size_t len);

/* The kernel's "done" header: status, result, error, files. */
int exec_result_on_done(struct exec_result *r, yajl_val done, struct err **errp);

/* Note why the execution ended badly; status and kernel state as given. */
void exec_result_fail(struct exec_result *r, enum exec_status status, bool kernel_restarted,
		      const char *reason);

const char *exec_status_name(enum exec_status st);

/* The line number of the last frame of the user's cell in r's traceback:
 * the kernel names each execution's code <cell-N>, N growing, so the cell
 * with the largest N is this execution's (a frame of an older cell is a
 * function defined there, whose line is not in this code). 0: none. */
long exec_result_cell_frame(const struct exec_result *r);
/* Line l (1-based) of code, its length in *n; NULL when there is none. */
const char *exec_code_line(const char *code, size_t len, long l, size_t *n);
/* The cap of cell_text, in bytes (cut on a UTF-8 boundary). */
#define EXEC_CELL_TEXT_MAX 512
/* Set r's cell_line and cell_text from its traceback and the code that
 * ran (Python's: the kernel's <cell-N> frames). Nothing without an error
 * or a frame of the cell, or when the line is not in code. */
void exec_result_set_cell_line(struct exec_result *r, const char *code, size_t len);

/* "cell_line": {"line", "text"} or null, into the open error object. */
void exec_cell_line_json(const struct exec_result *r, yajl_gen g);

/* The exec result object of the API (docs/api.md). */
void exec_result_to_json(const struct exec_result *r, yajl_gen g);

#endif

/* http_head_scan.c: line rules of a request head, byte by byte. */
#include "http_head_scan.h"

#include <stdio.h>
#include <string.h>

void http_head_scan_init(struct http_head_scan *s, size_t max, bool leading_empty_lines)
{
	memset(s, 0, sizeof(*s));
	s->max = max;
	s->line_start = true;
	s->first_line = true;
	s->leading_ok = leading_empty_lines;
}

static long refuse(struct http_head_scan *s, int status, const char *why)
{
	s->status = status;
	s->why = why;
	return -1;
}

long http_head_scan(struct http_head_scan *s, const char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)buf[i];
		if (++s->seen > s->max) {
			snprintf(s->why_buf, sizeof(s->why_buf),
				 "request head larger than %zu bytes", s->max);
			return refuse(s, 431, s->why_buf);
		}
		if (c == '\0')
			return refuse(s, 400, "a NUL byte in the request head");
		if (s->prev == '\r' && c != '\n')
			return refuse(s, 400, "a CR without LF in the request head");
		if (c == '\n' && s->prev != '\r')
			return refuse(s, 400, "a bare LF line end in the request head");
		s->prev = c;
		if (s->line_start && (c == ' ' || c == '\t'))
			return refuse(s, 400,
				      s->first_line ? "whitespace before the request line"
						    : "a folded header line (obs-fold)");
		if (s->line_start && c == '\r') {
			if (!s->first_line)
				s->blank = true;
			else if (s->leading_ok)
				s->in_leading = true;
			else
				return refuse(s, 400, "an empty line before the request line");
		}
		if (c == '\n') {
			if (s->blank) {
				s->ended = true;
				return (long)(i + 1);
			}
			s->line_start = true;
			if (s->in_leading)
				s->in_leading = false; /* still before the request line */
			else
				s->first_line = false;
		} else if (c != '\r') {
			s->line_start = false;
		}
	}
	return (long)len;
}

/* clock.h: wall-clock and monotonic milliseconds, RFC 3339 formatting. */
#ifndef CI_CLOCK_H
#define CI_CLOCK_H

#include <stddef.h>
#include <stdint.h>

/* Milliseconds since the Unix epoch (wall clock: what Redis and clients see). */
int64_t clock_now_ms(void);

/* Milliseconds of CLOCK_MONOTONIC, for durations. */
int64_t clock_mono_ms(void);

/* Microseconds of CLOCK_MONOTONIC. */
int64_t clock_mono_us(void);

/* "2026-11-30T14:30:10.123Z"; buf needs 25 bytes. Returns buf. */
char *clock_format_rfc3339(int64_t epoch_ms, char *buf, size_t size);

#endif

/* SPDX-License-Identifier: MIT */
/* What every fuzz target shares: how it stops on a broken promise or a broken harness, and reads its input. */
#ifndef LAZYRESTORE_FUZZ_H
#define LAZYRESTORE_FUZZ_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The code under test broke a promise: abort(), which libFuzzer reports as
 * a crash and saves the input.  The harness itself failed (no tmpfs, no
 * socket): exit(2), which is not a finding about the code.
 */
__attribute__((format(printf, 2, 3), noreturn)) static inline void fz_stop(bool broken_promise, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: %s", program_invocation_short_name, broken_promise ? "invariant violated: " : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (broken_promise)
		abort();
	exit(2);
}

#define violation(...) fz_stop(true, __VA_ARGS__)
#define fatal(...)     fz_stop(false, __VA_ARGS__)

/* The fuzzer's bytes, consumed front to back. */
struct input {
	const uint8_t *p;
	size_t left;
};

/* The next n bytes into buf, or false (nothing taken) if fewer are left. */
static inline bool take(struct input *in, void *buf, size_t n)
{
	if (in->left < n)
		return false;
	memcpy(buf, in->p, n);
	in->p += n;
	in->left -= n;
	return true;
}

#endif

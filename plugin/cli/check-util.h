/* SPDX-License-Identifier: MIT */
/* The pure parts of lazyrestore check (unit-tested in plugin/cli/tests/test_check.c). */
#ifndef LAZYRESTORE_CHECK_UTIL_H
#define LAZYRESTORE_CHECK_UTIL_H

#include <stddef.h>
#include <stdio.h>

/* The selected word of a sysfs choice file: "always [madvise] never" -> "madvise"; s itself without brackets. */
void check_bracketed(const char *s, char *out, size_t size);
/* s as a JSON string literal, quotes included. */
void check_json_str(FILE *o, const char *s);

#endif

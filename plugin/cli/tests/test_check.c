// SPDX-License-Identifier: MIT
/* Unit tests of lazyrestore check's pure parts: sysfs choice parsing and JSON strings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "plugin/cli/check-util.h"

static void test_bracketed(void **state)
{
	char out[32];

	check_bracketed("always [madvise] never", out, sizeof(out));
	assert_string_equal(out, "madvise");
	check_bracketed("[always] defer defer+madvise madvise never", out, sizeof(out));
	assert_string_equal(out, "always");
	check_bracketed("always madvise [never]", out, sizeof(out));
	assert_string_equal(out, "never");
	check_bracketed("no brackets", out, sizeof(out));
	assert_string_equal(out, "no brackets");
	check_bracketed("half [open", out, sizeof(out));
	assert_string_equal(out, "half [open");
	check_bracketed("[a-much-longer-word-than-the-buffer]", out, 8);
	assert_string_equal(out, "a-much-");
}

static void json_of(const char *s, char *buf, size_t size)
{
	FILE *f = fmemopen(buf, size, "w");

	assert_non_null(f);
	check_json_str(f, s);
	fclose(f);
}

static void test_json_str(void **state)
{
	char buf[128];

	json_of("AMD EPYC", buf, sizeof(buf));
	assert_string_equal(buf, "\"AMD EPYC\"");
	json_of("a \"quoted\" \\ path", buf, sizeof(buf));
	assert_string_equal(buf, "\"a \\\"quoted\\\" \\\\ path\"");
	json_of("tab\there\nline\x01", buf, sizeof(buf));
	assert_string_equal(buf, "\"tab\\u0009here\\u000aline\\u0001\"");
	json_of("", buf, sizeof(buf));
	assert_string_equal(buf, "\"\"");
	json_of("caf\xc3\xa9", buf, sizeof(buf)); /* UTF-8 passes through */
	assert_string_equal(buf, "\"caf\xc3\xa9\"");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bracketed),
	    cmocka_unit_test(test_json_str),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

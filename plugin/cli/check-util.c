// SPDX-License-Identifier: MIT
/* The pure parts of lazyrestore check. */
#include "plugin/cli/check-util.h"

#include <string.h>

void check_bracketed(const char *s, char *out, size_t size)
{
	const char *a = strchr(s, '['), *b = a ? strchr(a, ']') : NULL;

	if (!a || !b)
		snprintf(out, size, "%s", s);
	else
		snprintf(out, size, "%.*s", (int)(b - a - 1), a + 1);
}

void check_json_str(FILE *o, const char *s)
{
	fputc('"', o);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			fprintf(o, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(o, "\\u%04x", ch);
		else
			fputc(ch, o);
	}
	fputc('"', o);
}

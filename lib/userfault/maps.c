// SPDX-License-Identifier: MIT
/*
 * Is a range private anonymous memory?  Read from /proc/self/maps, the only
 * place the kernel says so for every VMA the range covers.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/userfault/internal.h"

struct vma {
	uintptr_t start, end;
	char perms[5];
	unsigned long inode;
	const char *path; /* "" for a nameless mapping */
};

static int parse_line(char *line, struct vma *v)
{
	int off = 0;

	if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %4s %*x %*x:%*x %lu %n", &v->start, &v->end, v->perms, &v->inode,
		   &off) < 4)
		return -1;
	v->path = line + off;
	v->path += strspn(v->path, " ");
	line[strcspn(line, "\n")] = '\0';
	return 0;
}

/* Anonymous private: no file behind it; the heap and prctl-named anonymous
 * memory count, the stack does not (the SIGBUS handler runs on it). */
static bool anon_private(const struct vma *v)
{
	if (v->perms[3] != 'p' || v->inode != 0)
		return false;
	return v->path[0] == '\0' || !strcmp(v->path, "[heap]") || !strncmp(v->path, "[anon:", 6);
}

int uf_check_anon_private(const char *fn, const void *addr, size_t len)
{
	uintptr_t next = (uintptr_t)addr, end = next + len;
	char *line = NULL;
	size_t cap = 0;
	FILE *f;
	int ret = -1;

	f = fopen("/proc/self/maps", "re");
	if (!f)
		return uf_fail(errno, fn, "cannot open /proc/self/maps", NULL);
	while (next < end && getline(&line, &cap, f) > 0) {
		struct vma v;

		if (parse_line(line, &v) < 0) {
			uf_fail(EIO, fn, "unparsable line in /proc/self/maps", NULL);
			goto out;
		}
		if (v.end <= next)
			continue;
		if (v.start > next) {
			uf_fail(ENOMEM, fn, "range has an unmapped hole at", (void *)next);
			goto out;
		}
		if (!anon_private(&v)) {
			uf_fail(EINVAL, fn, "not private anonymous memory at", (void *)next);
			goto out;
		}
		next = v.end;
	}
	if (next < end)
		uf_fail(ENOMEM, fn, "range has an unmapped hole at", (void *)next);
	else
		ret = 0;
out:
	free(line);
	fclose(f);
	return ret;
}

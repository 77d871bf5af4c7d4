/* SPDX-License-Identifier: MIT */
/* What the test programs share besides the pattern: how they report to the test. */
#ifndef LAZYRESTORE_TEST_PROGS_H
#define LAZYRESTORE_TEST_PROGS_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline void prog_die(const char *what)
{
	perror(what);
	exit(1);
}

/* DIR/NAME.<pid> with text, atomically (the test polls for the file to appear). */
static inline void prog_write_file(const char *dir, const char *name, const char *text)
{
	char path[512], tmp[520];
	int fd;

	snprintf(path, sizeof(path), "%s/%s.%d", dir, name, getpid());
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text) || close(fd))
		prog_die(tmp);
	if (rename(tmp, path))
		prog_die(path);
}

#endif

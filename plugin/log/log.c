// SPDX-License-Identifier: MIT
/* Log sink shared by every thread of the page server (one write() per line). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "plugin/log/log.h"

static int log_fd = STDERR_FILENO;
static int log_lvl = LR_LOG_WARN;
static struct timespec log_t0;

int lr_log_open(const char *path)
{
	clock_gettime(CLOCK_MONOTONIC, &log_t0);
	if (!path)
		return 0;
	if (!strcmp(path, "-")) {
		log_fd = STDOUT_FILENO;
		return 0;
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0) {
		fprintf(stderr, "Error: can't open log file %s: %s\n", path, strerror(errno));
		return -1;
	}
	log_fd = fd;
	return 0;
}

void lr_log_set_level(int level)
{
	log_lvl = level;
}

int lr_log_level(void)
{
	return log_lvl;
}

void lr_log_close(void)
{
	if (log_fd > STDERR_FILENO)
		close(log_fd);
	log_fd = STDERR_FILENO;
}

static const char *level_prefix(int level)
{
	switch (level) {
	case LR_LOG_ERROR:
		return "Error";
	case LR_LOG_WARN:
		return "Warn ";
	default:
		return NULL;
	}
}

void lr_log_msg(int level, const char *file, int line, const char *fmt, ...)
{
	char buf[1024];
	struct timespec now;
	int saved = errno, n;
	const char *prefix = level_prefix(level);
	const char *base = strrchr(file, '/');

	if (level > log_lvl)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	double t = (now.tv_sec - log_t0.tv_sec) + (now.tv_nsec - log_t0.tv_nsec) / 1e9;
	n = snprintf(buf, sizeof(buf), "(%02.6f) ", t);
	if (prefix)
		n += snprintf(buf + n, sizeof(buf) - n, "%s (%s:%d): ", prefix, base ? base + 1 : file, line);
	va_list ap;
	va_start(ap, fmt);
	errno = saved;
	n += vsnprintf(buf + n, sizeof(buf) - n, fmt, ap);
	va_end(ap);
	if (n >= (int)sizeof(buf) - 1)
		n = sizeof(buf) - 2;
	if (buf[n - 1] != '\n')
		buf[n++] = '\n';
	if (write(log_fd, buf, n) < 0) {
		/* nowhere left to report it */
	}
	errno = saved;
}

int lr_log_verbosity_opt(const char *arg, int *level)
{
	char *end;
	long v;

	if (!arg || !*arg) {
		(*level)++;
		return 0;
	}
	if (arg[strspn(arg, "v")] == '\0') { /* -vvv: getopt gave us the "vv" after the first */
		*level += 1 + (int)strlen(arg);
		return 0;
	}
	v = strtol(arg, &end, 10);
	if (*end || v < 0 || v > 10) {
		fprintf(stderr, "lazyrestore: bad verbosity '%s' (0..10)\n", arg);
		return -1;
	}
	*level = (int)v;
	return 0;
}

// SPDX-License-Identifier: MIT
/*
 * Start `lazyrestore lazy-pages` for this restore: detached (a session of its
 * own, reparented away from criu, so it outlives `criu restore -d` and its
 * exit is never a SIGCHLD of criu's), with nothing of criu's open but the
 * status pipe, its log in the work dir, and wait for its status byte.
 *
 * Options (options.c: the environment, else the config file; documented in
 * man/lazyrestore-plugin.7):
 *   LAZYRESTORE_BIN        the lazyrestore binary (default: next to the .so,
 *                          ../lazyrestore, then the installed one)
 *   LAZYRESTORE_LOG        the daemon's log (default lazyrestore.log; relative
 *                          to the work dir)
 *   LAZYRESTORE_STATS      write the daemon's stats as JSON there at its exit
 *   LAZYRESTORE_WORKERS    prefetch threads (lazy-pages --workers)
 *   LAZYRESTORE_PAGE_SERVER HOST:PORT: pages from a page server
 *                          (lazy-pages --page-server --address HOST --port PORT)
 *   LAZYRESTORE_START_TIMEOUT seconds to wait for the daemon (default 30)
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "plugin/criu/lrplugin.h"

#ifndef LR_INSTALL_BIN
#define LR_INSTALL_BIN "/usr/local/bin/lazyrestore"
#endif

#define MAX_ARGS 32

static bool executable(const char *p)
{
	struct stat st;

	return !stat(p, &st) && S_ISREG(st.st_mode) && !access(p, X_OK);
}

static int find_bin(char *out, size_t len)
{
	const char *env = lrp_opt("LAZYRESTORE_BIN");
	Dl_info info;

	if (env && *env) {
		snprintf(out, len, "%s", env);
		return executable(out) ? 0 : -1;
	}
	if (dladdr((void *)find_bin, &info) && info.dli_fname) {
		const char *slash = strrchr(info.dli_fname, '/');
		int dir = slash ? (int)(slash - info.dli_fname) : 1;

		char real[PATH_MAX];

		if (snprintf(out, len, "%.*s/../lazyrestore", dir, slash ? info.dli_fname : ".") < (int)len &&
		    executable(out)) {
			if (realpath(out, real) && strlen(real) < len)
				strcpy(out, real);
			return 0;
		}
	}
	snprintf(out, len, "%s", LR_INSTALL_BIN);
	return executable(out) ? 0 : -1;
}

struct argv {
	char *v[MAX_ARGS];
	char store[8][PATH_MAX + 32];
	int n, nstore;
	bool overflow;
};

static void add(struct argv *a, const char *s)
{
	if (a->n < MAX_ARGS - 1)
		a->v[a->n++] = (char *)s;
	else
		a->overflow = true;
	a->v[a->n] = NULL;
}

/* "--opt=" and the first LEN bytes of VALUE as one argument. */
static void addopt(struct argv *a, const char *opt, const char *value, int len)
{
	int n;

	if (a->nstore >= 8) {
		a->overflow = true;
		return;
	}
	n = snprintf(a->store[a->nstore], sizeof(a->store[0]), "%s%.*s", opt, len, value);
	if (n < 0 || (size_t)n >= sizeof(a->store[0]))
		a->overflow = true;
	add(a, a->store[a->nstore++]);
}

/* The page-server case: our daemon's pages come from HOST:PORT instead of the pages files. */
static int page_server_args(struct argv *a, const char *ps, char *why, size_t whylen)
{
	const char *colon = strrchr(ps, ':');

	if (!colon || colon == ps || !colon[1]) {
		snprintf(why, whylen, "LAZYRESTORE_PAGE_SERVER=%s is not HOST:PORT", ps);
		return -1;
	}
	add(a, "--page-server");
	addopt(a, "--port=", colon + 1, INT_MAX);
	addopt(a, "--address=", ps, (int)(colon - ps));
	return 0;
}

static int build_args(struct argv *a, const char *images, char *bin, size_t len, char *why, size_t whylen)
{
	const char *ps = lrp_opt("LAZYRESTORE_PAGE_SERVER"), *stats = lrp_opt("LAZYRESTORE_STATS");
	const char *workers = lrp_opt("LAZYRESTORE_WORKERS"), *log = lrp_opt("LAZYRESTORE_LOG");
	static char level[32];

	if (find_bin(bin, len)) {
		snprintf(why, whylen, "no lazyrestore binary (%s): set LAZYRESTORE_BIN", bin);
		return -1;
	}
	add(a, bin);
	add(a, "lazy-pages");
	if (ps && *ps && page_server_args(a, ps, why, whylen))
		return -1;
	if (stats && *stats)
		addopt(a, "--stats=", stats, INT_MAX);
	if (workers && *workers)
		addopt(a, "--workers=", workers, INT_MAX);
	addopt(a, "--images-dir=", images, INT_MAX);
	add(a, "--work-dir=.");
	addopt(a, "--log-file=", log && *log ? log : "lazyrestore.log", INT_MAX);
	snprintf(level, sizeof(level), "--verbosity=%u", log_get_loglevel());
	add(a, level);
	add(a, "--status-fd=3");
	if (a->overflow) {
		snprintf(why, whylen, "the daemon's command line is too long (paths in LAZYRESTORE_*?)");
		return -1;
	}
	return 0;
}

/* FD moved to 10 or above (close-on-exec), so that placing 0-3 can't clobber it. */
static int high(int fd)
{
	int h = fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 10);

	if (fd >= 0)
		close(fd);
	return h;
}

/* In the daemon, before exec: fds 0-2 to /dev/null and the log, 3 the status pipe. */
static void child_exec(const struct argv *a, const char *log, int status_fd)
{
	int st = high(status_fd);
	int null = high(open("/dev/null", O_RDWR | O_CLOEXEC));
	int lfd = high(open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644));
	sigset_t none;

	/* dup2 onto another number clears close-on-exec; these four are all that stays open. */
	if (st < 0 || null < 0 || lfd < 0 || dup2(null, 0) < 0 || dup2(lfd, 1) < 0 || dup2(lfd, 2) < 0 ||
	    dup2(st, 3) < 0)
		_exit(126);
	syscall(SYS_close_range, 4U, ~0U, 0U);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	execv(a->v[0], a->v);
	dprintf(2, "Error (lazyrestore.so): can't run %s: %s\n", a->v[0], strerror(errno));
	_exit(127);
}

/* Fork twice: the daemon is not criu's child; its pid comes back through a pipe. */
static pid_t spawn(const struct argv *a, const char *log, int status_fd, int status_rd)
{
	int p[2];
	pid_t mid, pid = -1;

	if (pipe2(p, O_CLOEXEC))
		return -1;
	mid = fork();
	if (mid == 0) {
		close(p[0]);
		close(status_rd);
		if (setsid() < 0)
			_exit(1);
		pid = fork();
		if (pid == 0)
			child_exec(a, log, status_fd);
		_exit(write(p[1], &pid, sizeof(pid)) == sizeof(pid) && pid > 0 ? 0 : 1);
	}
	close(p[1]);
	if (mid > 0) {
		int st;
		if (read(p[0], &pid, sizeof(pid)) != sizeof(pid))
			pid = -1;
		while (waitpid(mid, &st, 0) < 0 && errno == EINTR)
			;
	}
	close(p[0]);
	return pid;
}

/* A log line without its "(seconds) " timestamp. */
static const char *untimed(const char *line)
{
	const char *close = line[0] == '(' ? strstr(line, ") ") : NULL;

	return close ? close + 2 : line;
}

/* Append ": " and the first error line of the daemon's log (else its last line) to WHY. */
static void log_reason(const char *log, char *why, size_t whylen)
{
	FILE *f = fopen(log, "re");
	char line[1024], pick[1024] = "";
	size_t used = strlen(why);

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (strstr(line, "Error")) {
			snprintf(pick, sizeof(pick), "%s", untimed(line));
			break;
		}
		if (*line)
			snprintf(pick, sizeof(pick), "%s", untimed(line));
	}
	fclose(f);
	if (*pick && used < whylen)
		snprintf(why + used, whylen - used, ": %s", pick);
}

static int wait_ready(int fd, int timeout_s)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char byte;
	int r;

	do
		r = poll(&p, 1, timeout_s * 1000);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return -ETIMEDOUT;
	if (r < 0)
		return -errno;
	return read(fd, &byte, 1) == 1 && byte == 0 ? 0 : -EPIPE;
}

int lrp_start(struct lrp_daemon *d, const char *images, char *why, size_t whylen)
{
	const char *tmo = lrp_opt("LAZYRESTORE_START_TIMEOUT"), *log = lrp_opt("LAZYRESTORE_LOG");
	static struct argv a;
	char bin[PATH_MAX], reason[1024];
	int st[2], r, timeout_s = tmo && atoi(tmo) > 0 ? atoi(tmo) : 30;

	memset(&a, 0, sizeof(a));
	d->pid = -1;
	d->pidfd = -1;
	snprintf(d->log, sizeof(d->log), "%s", log && *log ? log : "lazyrestore.log");
	if (build_args(&a, images, bin, sizeof(bin), why, whylen))
		return -1;
	if (pipe2(st, O_CLOEXEC)) {
		snprintf(why, whylen, "pipe: %s", strerror(errno));
		return -1;
	}
	d->pid = spawn(&a, d->log, st[1], st[0]);
	close(st[1]);
	if (d->pid < 0) {
		snprintf(why, whylen, "can't start %s: %s", bin, strerror(errno));
		close(st[0]);
		return -1;
	}
	d->pidfd = (int)syscall(SYS_pidfd_open, d->pid, 0);
	r = wait_ready(st[0], timeout_s);
	close(st[0]);
	if (!r) {
		lrp_info("%s lazy-pages (pid %d) listens; log %s", bin, d->pid, d->log);
		return 0;
	}
	if (r == -ETIMEDOUT)
		snprintf(reason, sizeof(reason), "did not listen within %d s", timeout_s);
	else
		snprintf(reason, sizeof(reason), "exited before listening");
	log_reason(d->log, reason, sizeof(reason));
	snprintf(why, whylen, "%s lazy-pages (pid %d, log %s): %s", bin, d->pid, d->log, reason);
	lrp_kill(d);
	return -1;
}

void lrp_kill(struct lrp_daemon *d)
{
	if (d->pidfd >= 0) {
		syscall(SYS_pidfd_send_signal, d->pidfd, SIGKILL, NULL, 0);
		close(d->pidfd);
	}
	d->pidfd = -1;
	d->pid = -1;
}

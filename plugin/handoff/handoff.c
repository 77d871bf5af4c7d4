// SPDX-License-Identifier: MIT
/*
 * Receiving the restored tasks' uffds.  The peer is criu restore, but every
 * record is checked as if it were hostile: unknown or repeated pids, short
 * records, missing or extra fds, truncated control data, fds that are not
 * userfaultfds — each is a clear error, after which the caller stops the tree.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "plugin/engine/tree.h"
#include "plugin/handoff/handoff.h"
#include "plugin/log/log.h"

int lr_handoff_listen(void)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0) {
		pr_perror("can't create %s", LR_LAZY_SOCK_NAME);
		return -1;
	}
	strcpy(a.sun_path, LR_LAZY_SOCK_NAME);
	if (unlink(LR_LAZY_SOCK_NAME) && errno != ENOENT)
		pr_warn("can't remove a stale %s: %m", LR_LAZY_SOCK_NAME);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 10)) {
		pr_perror("can't listen on %s", LR_LAZY_SOCK_NAME);
		close(fd);
		return -1;
	}
	return fd;
}

int lr_handoff_accept(int lfd, pid_t *peer)
{
	struct ucred cr;
	socklen_t l = sizeof(cr);
	int fd;

	do
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	while (fd < 0 && errno == EINTR);
	if (fd < 0) {
		pr_perror("accept on %s", LR_LAZY_SOCK_NAME);
		return -1;
	}
	*peer = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) ? 0 : cr.pid;
	return fd;
}

static int send_word(int cfd, uint32_t w, const char *what, bool quiet)
{
	ssize_t n;

	do
		n = send(cfd, &w, sizeof(w), MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n == sizeof(w))
		return 0;
	if (!quiet)
		pr_warn("%s: can't send the %s: %s", LR_LAZY_SOCK_NAME, what, n < 0 ? strerror(errno) : "short send");
	return -1;
}

int lr_handoff_hold(int cfd)
{
	return send_word(cfd, LR_HOLD_TASKS, "request to hold the tasks", false);
}

int lr_handoff_release(int cfd, bool quiet)
{
	return send_word(cfd, LR_RELEASE_TASKS, "release of the tasks", quiet);
}

struct rx {
	int fd;
	pid_t peer;
	size_t got;   /* records so far */
	uint64_t off; /* stream offset, for messages */
	bool *seen;   /* per expected pid */
	const struct lr_handoff_expect *x;
	char why[512];
};

/* Exactly n bytes, or an error naming what was expected. */
static int read_full(struct rx *r, void *buf, size_t n, const char *what)
{
	size_t have = 0;

	while (have < n) {
		ssize_t k = recv(r->fd, (char *)buf + have, n - have, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			snprintf(r->why, sizeof(r->why),
				 "%s: offset %llu: %s while reading %s (after %zu of %zu tasks)", LR_LAZY_SOCK_NAME,
				 (unsigned long long)r->off,
				 k < 0 ? strerror(errno) : (have ? "short message" : "connection closed"), what, r->got,
				 r->x->nr_alive + r->x->nr_zombies);
			return -1;
		}
		have += k;
	}
	r->off += n;
	return 0;
}

static bool is_uffd(int fd)
{
	char path[64], link[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n < 0)
		return false;
	link[n] = 0;
	return !strcmp(link, "anon_inode:[userfaultfd]");
}

static void close_fds(struct cmsghdr *c)
{
	size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
	int *fds = (int *)CMSG_DATA(c);

	for (size_t i = 0; i < n; i++)
		close(fds[i]);
}

/* The 1-byte message carrying the uffd of task vpid. */
static int recv_uffd(struct rx *r, uint32_t vpid, int *out)
{
	char byte, ctl[CMSG_SPACE(sizeof(int) * 4)];
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
	struct cmsghdr *c;
	const char *bad = NULL;
	ssize_t n;

	do
		n = recvmsg(r->fd, &m, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	c = n > 0 ? CMSG_FIRSTHDR(&m) : NULL;
	if (n < 0)
		bad = strerror(errno);
	else if (n == 0)
		bad = "connection closed instead of the uffd message";
	else if (m.msg_flags & MSG_CTRUNC)
		bad = "control data truncated (MSG_CTRUNC)";
	else if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
		bad = "no file descriptor with the uffd message";
	else if (c->cmsg_len != CMSG_LEN(sizeof(int)) || CMSG_NXTHDR(&m, c))
		bad = "more than one file descriptor";
	else if (!is_uffd(*(int *)CMSG_DATA(c)))
		bad = "the descriptor is not a userfaultfd";
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && bad)
		close_fds(c);
	if (bad) {
		snprintf(r->why, sizeof(r->why), "%s: offset %llu: task %u: %s", LR_LAZY_SOCK_NAME,
			 (unsigned long long)r->off, vpid, bad);
		return -1;
	}
	r->off += n;
	memcpy(out, CMSG_DATA(c), sizeof(int));
	return 0;
}

/* Index of pid in list, or -1. */
static long find(const uint32_t *v, size_t n, uint32_t pid)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == pid)
			return (long)i;
	return -1;
}

/* Check a pid against what pstree.img promises and mark it received. */
static int expect_pid(struct rx *r, uint32_t pid, bool zombie)
{
	const struct lr_handoff_expect *x = r->x;
	long i = zombie ? find(x->zombies, x->nr_zombies, pid) : find(x->alive, x->nr_alive, pid);
	size_t slot = zombie ? x->nr_alive + (size_t)i : (size_t)i;

	if (i < 0 || r->seen[slot]) {
		snprintf(r->why, sizeof(r->why), "%s: offset %llu: %s %s %u", LR_LAZY_SOCK_NAME,
			 (unsigned long long)r->off - 4, i < 0 ? "unknown" : "repeated", zombie ? "zombie" : "task",
			 pid);
		return -1;
	}
	r->seen[slot] = true;
	return 0;
}

static int one_record(struct rx *r, const struct lr_handoff_ops *ops, void *arg)
{
	int32_t v;
	int uffd;

	if (read_full(r, &v, sizeof(v), "a task's pid"))
		return -1;
	if ((uint32_t)v == LR_RESTORE_FINISHED || v == 0 || v == INT32_MIN) {
		snprintf(r->why, sizeof(r->why), "%s: offset %llu: %s 0x%x after %zu of %zu tasks", LR_LAZY_SOCK_NAME,
			 (unsigned long long)r->off - 4, (uint32_t)v == LR_RESTORE_FINISHED ? "end marker" : "bad pid",
			 (uint32_t)v, r->got, r->x->nr_alive + r->x->nr_zombies);
		return -1;
	}
	if (v < 0)
		return expect_pid(r, (uint32_t)-v, true);
	if (expect_pid(r, (uint32_t)v, false) || recv_uffd(r, (uint32_t)v, &uffd))
		return -1;
	pid_t real = r->peer ? lr_tree_find(r->peer, (uint32_t)v) : 0;
	if (!real)
		pr_warn("task %u: not found below the restore (pid %d); it can't be killed on error", v, r->peer);
	if (ops->task(arg, (uint32_t)v, real, uffd)) {
		snprintf(r->why, sizeof(r->why), "task %u: can't serve its uffd", (uint32_t)v);
		return -1;
	}
	return 0;
}

int lr_handoff_receive(int cfd, pid_t peer, const struct lr_handoff_expect *x, const struct lr_handoff_ops *ops,
		       void *arg)
{
	size_t total = x->nr_alive + x->nr_zombies;
	struct rx r = {.fd = cfd, .peer = peer, .x = x};
	uint32_t end;
	int ret = -1;

	r.seen = calloc(total ? total : 1, sizeof(bool));
	if (!r.seen) {
		snprintf(r.why, sizeof(r.why), "out of memory");
		goto out;
	}
	for (; r.got < total; r.got++)
		if (one_record(&r, ops, arg))
			goto out;
	if (read_full(&r, &end, sizeof(end), "the restore-finished marker"))
		goto out;
	if (end != LR_RESTORE_FINISHED) {
		snprintf(r.why, sizeof(r.why), "%s: offset %llu: 0x%x where the end marker 0x%x belongs",
			 LR_LAZY_SOCK_NAME, (unsigned long long)r.off - 4, end, LR_RESTORE_FINISHED);
		goto out;
	}
	pr_info("restore finished: %zu tasks handed over", total);
	ops->finished(arg);
	ret = 0;
out:
	if (ret)
		ops->failed(arg, r.why);
	free(r.seen);
	return ret;
}

// SPDX-License-Identifier: MIT
/* Supervisor process: uffd keeper and engine restarter. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugin/engine/tree.h"
#include "plugin/log/log.h"
#include "plugin/supervisor/supervisor.h"

struct sv_msg {
	uint32_t idx;
	struct lr_sv_task t;
};

int lr_sv_init(struct lr_sv *sv)
{
	memset(sv, 0, sizeof(*sv));
	sv->j.fd = -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv->sock)) {
		pr_perror("supervisor socketpair");
		return -1;
	}
	return lr_journal_create(&sv->j);
}

void lr_sv_fini(struct lr_sv *sv)
{
	for (unsigned i = 0; i < sv->nr_tasks; i++)
		if (sv->tasks[i].uffd >= 0)
			close(sv->tasks[i].uffd);
	close(sv->sock[0]);
	close(sv->sock[1]);
	lr_journal_destroy(&sv->j);
}

int lr_sv_send_task(struct lr_sv *sv, unsigned idx, const struct lr_sv_task *t)
{
	struct sv_msg m = {.idx = idx, .t = *t};
	char ctl[CMSG_SPACE(sizeof(int))] = {0};
	struct iovec iov = {.iov_base = &m, .iov_len = sizeof(m)};
	struct msghdr h = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&h);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &t->uffd, sizeof(int));
	while (sendmsg(sv->sock[1], &h, 0) != sizeof(m)) {
		if (errno != EINTR) {
			pr_perror("can't hand uffd %d of task %u to the supervisor", t->uffd, idx);
			return -1;
		}
	}
	return 0;
}

/* Take every record the engine sent so far. */
static int drain(struct lr_sv *sv)
{
	for (;;) {
		struct sv_msg m;
		char ctl[CMSG_SPACE(sizeof(int))];
		struct iovec iov = {.iov_base = &m, .iov_len = sizeof(m)};
		struct msghdr h = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
		ssize_t n = recvmsg(sv->sock[0], &h, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&h) : NULL;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n != sizeof(m) || !c || c->cmsg_type != SCM_RIGHTS || m.idx >= LR_JOURNAL_TASKS ||
		    m.idx != sv->nr_tasks) {
			pr_err("supervisor: bad record from the engine (%zd bytes, task %u of %u)", n, m.idx,
			       sv->nr_tasks);
			return -1;
		}
		memcpy(&m.t.uffd, CMSG_DATA(c), sizeof(int));
		sv->tasks[sv->nr_tasks++] = m.t;
	}
}

static void kill_tree(struct lr_sv *sv, const char *why)
{
	pid_t pids[LR_JOURNAL_TASKS];
	size_t n = 0;

	pr_err("%s; killing the restored tree", why);
	for (unsigned i = 0; i < sv->nr_tasks; i++)
		if (sv->tasks[i].real_pid > 0)
			pids[n++] = sv->tasks[i].real_pid;
	lr_tree_kill(pids, n);
}

/* Wait for the engine child, taking its records meanwhile. */
static int watch(struct lr_sv *sv, pid_t child, int *status)
{
	/* A pidfd turns readable the moment the child exits: no polling delay. */
	int pfd = (int)syscall(SYS_pidfd_open, child, 0);

	for (;;) {
		struct pollfd p[2] = {{.fd = sv->sock[0], .events = POLLIN}, {.fd = pfd, .events = POLLIN}};
		if (poll(p, pfd >= 0 ? 2 : 1, pfd >= 0 ? -1 : 50) < 0 && errno != EINTR) {
			pr_perror("supervisor poll");
			break;
		}
		if (drain(sv))
			break;
		pid_t w = waitpid(child, status, WNOHANG);
		if (w == child) {
			if (pfd >= 0)
				close(pfd);
			return drain(sv);
		}
		if (w < 0 && errno != EINTR) {
			pr_perror("supervisor waitpid");
			break;
		}
	}
	if (pfd >= 0)
		close(pfd);
	return -1;
}

int lr_supervise(struct lr_sv *sv, int (*engine)(void *arg, struct lr_sv *sv, bool resume), void *arg, int handoff_fd)
{
	bool resume = false;

	for (;;) {
		int status;
		pid_t child = fork();

		if (child < 0) {
			kill_tree(sv, "supervisor: can't start the engine");
			return 1;
		}
		if (child == 0) {
			/* The engine must not outlive us: we hold what it needs to restart. */
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			close(sv->sock[0]);
			_exit(engine(arg, sv, resume));
		}
		if (handoff_fd >= 0)
			close(handoff_fd);
		handoff_fd = -1;
		if (watch(sv, child, &status)) {
			kill(child, SIGKILL);
			waitpid(child, NULL, 0);
			kill_tree(sv, "supervisor: lost track of the engine");
			return 1;
		}
		if (WIFEXITED(status))
			return WEXITSTATUS(status);
		int sig = WTERMSIG(status);
		if (!sv->j.head->finished) {
			char why[128];
			snprintf(why, sizeof(why), "engine %d killed by signal %d during the hand-off", child, sig);
			kill_tree(sv, why);
			return 1;
		}
		if (++sv->restarts > LR_SV_MAX_RESTARTS) {
			kill_tree(sv, "engine keeps dying");
			return 1;
		}
		pr_warn("engine %d killed by signal %d; restart %u resumes from the images", child, sig, sv->restarts);
		resume = true;
	}
}

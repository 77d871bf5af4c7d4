// SPDX-License-Identifier: MIT
/*
 * fuzz_handoff: lr_handoff_receive() (plugin/handoff/) reading a hostile
 * lazy-pages.socket peer.  The input says what pstree.img expects and what
 * the peer sends over a socketpair: data, and 1-byte messages carrying file
 * descriptors (userfaultfds or pipes).  Checked besides "no crash": success
 * means every expected task arrived exactly once with a userfaultfd and the
 * end marker was seen; failure is reported once with a reason; no fd leaks.
 *
 * Input:  u8 nr_alive, u8 nr_zombies, then u32 pids (alive, then zombies),
 *         then a script of steps, each a u8 op:
 *           op % 4 == 0: u8 len, then len bytes of data
 *           op % 4 == 1: one byte carrying (op >> 2) & 7 fds (at most 5):
 *                        userfaultfds, or pipe ends when op & 0x20
 *           op % 4 == 2: a u32 pid (4 bytes follow), in host order
 *           op % 4 == 3: the end marker
 */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/uffd-compat.h"
#include "plugin/handoff/handoff.h"
#include "plugin/log/log.h"
#include "test/fuzz/fuzz.h"

#define MAX_EXPECT   8
#define MAX_FDS	     16 /* per input, all steps together */
#define MAX_FDS_STEP 5

struct seen {
	uint32_t alive[MAX_EXPECT], zombies[MAX_EXPECT];
	size_t nr_alive, nr_zombies;
	uint32_t got[MAX_EXPECT];
	size_t nr_got;
	int finished, failed;
};

static size_t count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	size_t n = 0;

	if (!d)
		fatal("opendir /proc/self/fd: %s", strerror(errno));
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* Independent of the reader's own /proc check: only a (fresh) userfaultfd takes UFFDIO_API. */
static bool is_uffd(int fd)
{
	struct uffdio_api api = {.api = UFFD_API};

	return ioctl(fd, UFFDIO_API, &api) == 0;
}

static bool listed(const uint32_t *v, size_t n, uint32_t pid)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == pid)
			return true;
	return false;
}

static int on_task(void *arg, uint32_t vpid, pid_t real_pid, int uffd)
{
	struct seen *s = arg;

	if (!listed(s->alive, s->nr_alive, vpid))
		violation("task %u handed over, pstree does not list it alive", vpid);
	if (listed(s->got, s->nr_got, vpid))
		violation("task %u handed over twice", vpid);
	if (!is_uffd(uffd))
		violation("task %u handed over fd %d, which is not a userfaultfd", vpid, uffd);
	if (real_pid != 0)
		violation("task %u: real pid %d without a peer", vpid, real_pid);
	s->got[s->nr_got++] = vpid;
	close(uffd);
	return 0;
}

static void on_finished(void *arg)
{
	((struct seen *)arg)->finished++;
}

static bool verbose; /* FUZZ_VERBOSE=1: say how each input ended, to debug it */

static void on_failed(void *arg, const char *why)
{
	struct seen *s = arg;

	if (!why || !*why)
		violation("failure reported without a reason");
	if (verbose)
		fprintf(stderr, "fuzz_handoff: failed: %s\n", why);
	s->failed++;
}

/* ---- the peer's side -------------------------------------------------- */

/*
 * Send without blocking: this thread is also the reader, so once the socket
 * buffer is full (many small messages) the script ends there.
 */
static bool send_msg(int sk, struct msghdr *m, size_t n)
{
	ssize_t r;

	do
		r = sendmsg(sk, m, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (r < 0 && errno == EINTR); /* libFuzzer's timer signals */
	if ((r < 0 && errno == EAGAIN) || (r >= 0 && (size_t)r < n))
		return false;
	if (r < 0)
		fatal("sendmsg to the hand-off socket: %s", strerror(errno));
	return true;
}

static bool send_data(int sk, const void *buf, size_t n)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = n};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};

	return send_msg(sk, &m, n);
}

static int new_fd(bool pipe_end)
{
	int p[2], fd;

	if (!pipe_end) {
		fd = lr_uffd_open(O_CLOEXEC | O_NONBLOCK, false, NULL);
		if (fd < 0)
			fatal("userfaultfd: %s", strerror(errno));
		return fd;
	}
	if (pipe2(p, O_CLOEXEC))
		fatal("pipe2: %s", strerror(errno));
	close(p[1]);
	return p[0];
}

static bool send_fds(int sk, int nr, bool pipes)
{
	char byte = 0, ctl[CMSG_SPACE(sizeof(int) * MAX_FDS_STEP)] = {0};
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	int fds[MAX_FDS_STEP] = {0};
	bool sent;

	if (nr) {
		struct cmsghdr *c;

		m.msg_control = ctl;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * nr);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nr);
		for (int i = 0; i < nr; i++)
			fds[i] = new_fd(pipes);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nr);
	}
	sent = send_msg(sk, &m, 1);
	/* In flight the kernel holds its own references. */
	for (int i = 0; i < nr; i++)
		close(fds[i]);
	return sent;
}

static void play(int sk, struct input *in)
{
	uint8_t op, len, data[255];
	uint32_t v;
	int fds = 0;

	while (take(in, &op, 1)) {
		switch (op % 4) {
		case 0:
			if (!take(in, &len, 1) || !take(in, data, len))
				return;
			if (!send_data(sk, data, len))
				return;
			break;
		case 1: {
			int nr = (op >> 2) & 7;

			if (nr > MAX_FDS_STEP)
				nr = MAX_FDS_STEP;

			if (fds + nr > MAX_FDS)
				nr = 0;
			fds += nr;
			if (!send_fds(sk, nr, op & 0x20))
				return;
			break;
		}
		case 2:
			if (!take(in, &v, sizeof(v)))
				return;
			if (!send_data(sk, &v, sizeof(v)))
				return;
			break;
		default:
			v = LR_RESTORE_FINISHED;
			if (!send_data(sk, &v, sizeof(v)))
				return;
			break;
		}
	}
}

/* Distinct pids, as pstree.img guarantees (img_read_pstree rejects duplicates). */
static void read_expect(struct input *in, struct seen *s)
{
	uint8_t na = 0, nz = 0;
	uint32_t pid;

	take(in, &na, 1);
	take(in, &nz, 1);
	for (int i = 0; i < (na % (MAX_EXPECT + 1)) + (nz % (MAX_EXPECT + 1)) && take(in, &pid, 4); i++) {
		bool zombie = i >= na % (MAX_EXPECT + 1);

		if (listed(s->alive, s->nr_alive, pid) || listed(s->zombies, s->nr_zombies, pid))
			continue;
		if (zombie)
			s->zombies[s->nr_zombies++] = pid;
		else
			s->alive[s->nr_alive++] = pid;
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	lr_log_set_level(LR_LOG_ERROR); /* a warning per task without a peer is noise here */
	verbose = getenv("FUZZ_VERBOSE") != NULL;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lr_handoff_ops ops = {.task = on_task, .finished = on_finished, .failed = on_failed};
	struct input in = {data, size};
	struct lr_handoff_expect x;
	struct seen s = {0};
	size_t fds_before = count_fds();
	int sk[2], ret;

	read_expect(&in, &s);
	x = (struct lr_handoff_expect){s.alive, s.nr_alive, s.zombies, s.nr_zombies};
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sk))
		fatal("socketpair: %s", strerror(errno));
	play(sk[1], &in);
	close(sk[1]);
	ret = lr_handoff_receive(sk[0], 0, &x, &ops, &s);
	close(sk[0]);

	if (verbose && ret == 0)
		fprintf(stderr, "fuzz_handoff: OK, %zu tasks handed over\n", s.nr_got);
	if (ret != 0 && ret != -1)
		violation("lr_handoff_receive returned %d", ret);
	if (ret == 0 && (s.finished != 1 || s.failed || s.nr_got != s.nr_alive))
		violation("success with finished %d, failed %d, %zu of %zu tasks handed over", s.finished, s.failed,
			  s.nr_got, s.nr_alive);
	if (ret == -1 && (s.failed != 1 || s.finished))
		violation("failure with failed %d, finished %d", s.failed, s.finished);
	/* Closing the socket dropped whatever was still in flight; what is left open leaked. */
	if (count_fds() != fds_before)
		violation("%zu fds open before, %zu after", fds_before, count_fds());
	return 0;
}

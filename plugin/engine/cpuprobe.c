// SPDX-License-Identifier: MIT
/*
 * May a prefetch worker copy while the restored program faults?  A worker
 * runs in idle time only (SCHED_IDLE), so it takes the CPU a faulting thread
 * sleeps on, and the woken thread has to preempt it: a switch from our
 * process to the program's.  What that switch costs differs by host, so it is
 * measured, not assumed: a child process faults pages of its own mapping on
 * one CPU while a thread of ours serves them from another, alternately with
 * and without a SCHED_IDLE thread of ours spinning on the child's CPU.  Where
 * the spinner makes a fault much slower, workers wait for a calm spell (no
 * fault served for a while) before each step instead.  The host does not
 * change under a running kernel, so the answer is kept for the boot in
 * PROBE_CACHE (the probe costs about 30 ms of every daemon's start).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/uffd-compat.h"
#include "plugin/engine/engine.h"
#include "plugin/engine/stats.h"
#include "plugin/log/log.h"

#define PROBE_FAULTS	64 /* per round: the tenth fastest of these */
#define PROBE_ROUNDS	2  /* of each kind, alternating */
#define PROBE_PAGE	4096UL
#define PROBE_TIMEOUT	2000 /* ms for one round */
#define SHARE_MAX_COST	1.5  /* a spinner may make a fault this much slower and workers still share */
#define PROBE_CACHE_DIR "/run/lazyrestore"
#define PROBE_CACHE	PROBE_CACHE_DIR "/workers-beside-faults"

struct sibling_probe {
	int uffd;
	int stop;   /* atomic: the server and spinner threads end */
	int ready;  /* atomic: the spinner runs in idle time on its CPU */
	int cpu[2]; /* [0] the child's and the spinner's, [1] the server's */
};

static int pin(int cpu)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	return sched_setaffinity(0, sizeof(s), &s);
}

/* The first two CPUs we may run on; false if there are fewer. */
static bool two_cpus(int cpu[2])
{
	cpu_set_t s;
	int n = 0;

	if (sched_getaffinity(0, sizeof(s), &s))
		return false;
	for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
		if (CPU_ISSET(c, &s))
			cpu[n++] = c;
	return n == 2;
}

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return x < y ? -1 : x > y;
}

static int send_fd(int sock, int fd)
{
	char byte = 0, ctl[CMSG_SPACE(sizeof(int))] = {0};
	struct iovec iov = {&byte, 1};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	return sendmsg(sock, &mh, 0) == 1 ? 0 : -1;
}

static int recv_fd(int sock)
{
	char byte, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {&byte, 1};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
	struct pollfd p = {sock, POLLIN, 0};
	int fd = -1;

	if (poll(&p, 1, PROBE_TIMEOUT) != 1 || recvmsg(sock, &mh, MSG_CMSG_CLOEXEC) != 1)
		return -1;
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS && cm->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}

/* The child: a uffd-registered mapping of its own, faulted round by round on command. */
static void __attribute__((noreturn)) child(int sock, int cpu)
{
	size_t len = 2 * PROBE_ROUNDS * PROBE_FAULTS * PROBE_PAGE;
	long long lat[PROBE_FAULTS];
	char cmd;

	int uffd = lr_uffd_new(O_CLOEXEC, 0);
	uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (pin(cpu) || uffd < 0 || m == MAP_FAILED)
		_exit(1);
	struct uffdio_register r = {.range = {(uintptr_t)m, len}, .mode = UFFDIO_REGISTER_MODE_MISSING};
	if (ioctl(uffd, UFFDIO_REGISTER, &r) || send_fd(sock, uffd))
		_exit(1);
	close(uffd);
	for (uint8_t *p = m; read(sock, &cmd, 1) == 1; p += PROBE_FAULTS * PROBE_PAGE) {
		for (int i = 0; i < PROBE_FAULTS; i++) {
			uint64_t t0 = lr_now_ns();
			(void)*(volatile uint8_t *)(p + (size_t)i * PROBE_PAGE);
			lat[i] = (long long)(lr_now_ns() - t0);
		}
		qsort(lat, PROBE_FAULTS, sizeof(lat[0]), cmp_ll);
		/*
		 * a low quantile, not the median: a task of someone else's on this
		 * CPU makes some faults as slow as the spinner does, not the fastest
		 */
		if (write(sock, &lat[PROBE_FAULTS / 10], sizeof(lat[0])) != sizeof(lat[0]))
			_exit(1);
	}
	_exit(0);
}

/* Serves the child's faults with zero pages, polling, from the other CPU. */
static void *server(void *arg)
{
	struct sibling_probe *sp = arg;
	struct uffd_msg msg;

	if (pin(sp->cpu[1]))
		pr_debug("sibling probe: server not pinned: %m");
	while (!__atomic_load_n(&sp->stop, __ATOMIC_ACQUIRE)) {
		if (read(sp->uffd, &msg, sizeof(msg)) != sizeof(msg) || msg.event != UFFD_EVENT_PAGEFAULT)
			continue;
		struct uffdio_zeropage z = {.range = {msg.arg.pagefault.address & ~(PROBE_PAGE - 1), PROBE_PAGE}};
		while (ioctl(sp->uffd, UFFDIO_ZEROPAGE, &z) && errno == EINTR)
			;
	}
	return NULL;
}

/* Stands in for a worker: runnable in idle time on the child's CPU. */
static void *spinner(void *arg)
{
	struct sibling_probe *sp = arg;
	struct sched_param p = {0};

	if (pin(sp->cpu[0]) || sched_setscheduler(0, SCHED_IDLE, &p))
		pr_debug("sibling probe: spinner not pinned or not idle: %m");
	__atomic_store_n(&sp->ready, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&sp->stop, __ATOMIC_ACQUIRE))
		__builtin_ia32_pause();
	return NULL;
}

/* One round in the child: its tenth fastest fault in ns, or -1. */
static long long round_trip(int sock)
{
	struct pollfd p = {sock, POLLIN, 0};
	long long med;

	if (write(sock, "r", 1) != 1 || poll(&p, 1, PROBE_TIMEOUT) != 1 || read(sock, &med, sizeof(med)) != sizeof(med))
		return -1;
	return med;
}

static int measure(struct sibling_probe *sp, int sock, long long best[2])
{
	best[0] = best[1] = -1;
	for (int r = 0; r < 2 * PROBE_ROUNDS; r++) {
		int with = (r + r / 2) % 2; /* A B B A */
		struct sibling_probe spin = *sp;
		pthread_t th;
		if (with && pthread_create(&th, NULL, spinner, &spin))
			return -1;
		/* a new thread may take milliseconds to first run: the round starts once it spins */
		while (with && !__atomic_load_n(&spin.ready, __ATOMIC_ACQUIRE))
			sched_yield();
		long long med = round_trip(sock);
		if (with) {
			__atomic_store_n(&spin.stop, 1, __ATOMIC_RELEASE);
			pthread_join(th, NULL);
		}
		if (med < 0)
			return -1;
		if (best[with] < 0 || med < best[with])
			best[with] = med;
	}
	return 0;
}

/*
 * Whether workers may share the CPUs.  *measured: the answer is the probe's,
 * and why holds its figures only; otherwise why says what stood in its way
 * and which way that decides.
 */
static bool measure_share(char *why, size_t len, bool *measured)
{
	struct sibling_probe sp = {.uffd = -1};
	long long best[2];
	int sv[2];
	pthread_t th;
	bool share = true, served = false;

	if (!two_cpus(sp.cpu)) {
		snprintf(why, len, "one CPU: workers wait for a calm spell");
		return false;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		snprintf(why, len, "probe not run (socketpair: %s): workers share", strerror(errno));
		return true;
	}
	pid_t pid = fork();
	if (pid == 0) {
		close(sv[0]);
		child(sv[1], sp.cpu[0]);
	}
	close(sv[1]);
	if (pid < 0) {
		snprintf(why, len, "probe not run (fork: %s): workers share", strerror(errno));
		close(sv[0]);
		return true;
	}
	sp.uffd = recv_fd(sv[0]);
	int fl = sp.uffd >= 0 ? fcntl(sp.uffd, F_GETFL) : -1;
	if (fl < 0 || fcntl(sp.uffd, F_SETFL, fl | O_NONBLOCK) || pthread_create(&th, NULL, server, &sp)) {
		snprintf(why, len, "probe not run (no userfaultfd from the child): workers share");
		goto out;
	}
	served = true;
	if (measure(&sp, sv[0], best)) {
		snprintf(why, len, "probe failed (a round gave no answer): workers share");
		goto out;
	}
	share = best[1] <= SHARE_MAX_COST * best[0];
	*measured = true;
	snprintf(why, len, "probe of %d x %d faults, p10 %.1f us alone, %.1f us beside an idle-time thread (%.2fx)",
		 PROBE_ROUNDS, PROBE_FAULTS, best[0] / 1e3, best[1] / 1e3, (double)best[1] / (double)best[0]);
out:
	close(sv[0]); /* the child reads EOF and exits */
	if (served) {
		__atomic_store_n(&sp.stop, 1, __ATOMIC_RELEASE);
		pthread_join(th, NULL);
	}
	if (sp.uffd >= 0)
		close(sp.uffd);
	kill(pid, SIGKILL); /* done or stuck: either way it has nothing more to say */
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	return share;
}

/* Tasks runnable on the machine now, this one included (procs_running of /proc/stat), 0 if unknown. */
static int runnable(void)
{
	FILE *f = fopen("/proc/stat", "re");
	char line[128];
	int n = 0;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "procs_running %d", &n) == 1)
			break;
	if (f)
		fclose(f);
	return n;
}

/* This boot's id (a random UUID per boot), or false. */
static bool boot_id(char *id, size_t len)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
	bool ok = f && fgets(id, (int)len, f) && strlen(id) > 1;

	if (f)
		fclose(f);
	if (ok)
		id[strcspn(id, "\n")] = 0;
	return ok;
}

/* The cached answer, if it is this boot's: "boot_id\n0|1\nwhy\n". */
static bool cached(const char *id, bool *share, char *why, size_t len)
{
	char line[3][256];
	FILE *f = fopen(PROBE_CACHE, "re");
	bool ok = f != NULL;

	for (int i = 0; ok && i < 3; i++)
		ok = fgets(line[i], sizeof(line[i]), f) && line[i][strlen(line[i]) - 1] == '\n';
	if (f)
		fclose(f);
	if (!ok)
		return false;
	for (int i = 0; i < 3; i++)
		line[i][strcspn(line[i], "\n")] = 0;
	if (strcmp(line[0], id) || (strcmp(line[1], "0") && strcmp(line[1], "1")))
		return false;
	*share = line[1][0] == '1';
	snprintf(why, len, "%s (this boot's probe, %s)", line[2], PROBE_CACHE);
	return true;
}

static void cache(const char *id, bool share, const char *why)
{
	char tmp[64];

	if (mkdir(PROBE_CACHE_DIR, 0755) && errno != EEXIST)
		return;
	snprintf(tmp, sizeof(tmp), "%s.%d", PROBE_CACHE, (int)getpid());
	FILE *f = fopen(tmp, "we");
	if (!f)
		return;
	bool ok = fprintf(f, "%s\n%d\n%s\n", id, share, why) > 0;
	if (fclose(f) || !ok || rename(tmp, PROBE_CACHE))
		unlink(tmp);
}

bool lr_probe_workers_share(char *why, size_t len)
{
	char id[64];
	bool share, have_id = boot_id(id, sizeof(id));

	if (have_id && cached(id, &share, why, len))
		return share;
	char figs[200];
	bool measured = false;
	int busy = runnable();
	share = measure_share(figs, sizeof(figs), &measured);
	if (!measured) { /* a failed probe, or one CPU (our affinity, not the host): not kept */
		snprintf(why, len, "%s", figs);
		return share;
	}
	/*
	 * "Share" measured while other tasks ran is not trusted: someone else's
	 * task on the child's CPU makes faults "alone" as slow as beside the
	 * spinner, and workers beside faults where they should wait cost the
	 * program's faults several times over.  Such a run waits for calm
	 * spells and keeps nothing; any other measurement is kept for the boot.
	 */
	if (share && busy > 1) {
		snprintf(why, len, "workers wait for a calm spell: %d tasks ran beside the %s", busy, figs);
		return false;
	}
	snprintf(why, len, "%s: %s", share ? "workers share the CPUs with faults" : "workers wait for a calm spell",
		 figs);
	if (have_id)
		cache(id, share, why);
	return share;
}

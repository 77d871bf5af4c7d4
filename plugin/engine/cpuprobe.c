// SPDX-License-Identifier: MIT
/*
 * How the fault thread and the prefetch workers should sit on the CPUs: what a
 * fault costs the faulting thread differs by host, so it is measured, not
 * assumed.  A child process faults pages of its own mapping on one CPU while
 * a thread of ours serves them, in rounds of two kinds, alternating:
 *
 * - workers beside faults: a worker runs in idle time only (SCHED_IDLE), so it
 *   takes the CPU a faulting thread sleeps on, and the woken thread has to
 *   preempt it.  Served from the other CPU with and without a SCHED_IDLE
 *   thread of ours spinning on the child's CPU; where the spinner makes a fault
 *   much slower, workers wait for a calm spell (no fault served for a while)
 *   before each step instead.
 * - the fault thread's CPU (follow.c): served by a thread polling on the other
 *   CPU (the fault thread streaming between faults), or by one sleeping on the
 *   child's own CPU.  Where the second is much faster (a host whose idle vCPUs
 *   halt makes every cross-CPU wake-up a trip through the host), the fault
 *   thread follows the faulting thread's CPU.
 *
 * The host does not change under a running kernel, so each answer is kept for
 * the boot in PROBE_CACHE_DIR (a probe costs about 30 ms of a daemon's start).
 */
#include <errno.h>
#include <limits.h>
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
#define FOLLOW_MIN_GAIN 1.5  /* the faulting thread's CPU must serve this much faster to be followed */
#define PROBE_CACHE_DIR "/run/lazyrestore"

/* One kind of round: where the server runs and how it waits, and whether a spinner runs. */
struct round_kind {
	bool same_cpu; /* the server on the child's CPU (else the other) */
	bool sleeping; /* the server sleeps in poll(2) between faults (else it polls the uffd) */
	bool spinner;  /* a SCHED_IDLE thread spins on the child's CPU */
};

struct sibling_probe {
	int uffd;
	int stop;   /* atomic: the server and spinner threads end */
	int ready;  /* atomic: the spinner runs in idle time on its CPU */
	int cpu[2]; /* [0] the child's and the spinner's, [1] the other */
	struct round_kind kind;
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

/* Serves the child's faults with zero pages, as the round's kind says. */
static void *server(void *arg)
{
	struct sibling_probe *sp = arg;
	struct uffd_msg msg;

	if (pin(sp->cpu[sp->kind.same_cpu ? 0 : 1]))
		pr_debug("sibling probe: server not pinned: %m");
	while (!__atomic_load_n(&sp->stop, __ATOMIC_ACQUIRE)) {
		struct pollfd p = {sp->uffd, POLLIN, 0};
		if (sp->kind.sleeping && poll(&p, 1, 10) <= 0)
			continue;
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

/* Rounds of kinds k[0] and k[1], A B B A: the tenth fastest fault of each kind's best round. */
static int measure(const struct sibling_probe *sp, int sock, const struct round_kind k[2], long long best[2])
{
	best[0] = best[1] = -1;
	for (int r = 0; r < 2 * PROBE_ROUNDS; r++) {
		int which = (r + r / 2) % 2; /* A B B A */
		struct sibling_probe run = *sp, spin = *sp;
		pthread_t th, spin_th;
		run.kind = k[which];
		if (pthread_create(&th, NULL, server, &run))
			return -1;
		bool spinning = k[which].spinner && !pthread_create(&spin_th, NULL, spinner, &spin);
		/* a new thread may take milliseconds to first run: the round starts once it spins */
		while (spinning && !__atomic_load_n(&spin.ready, __ATOMIC_ACQUIRE))
			sched_yield();
		long long med = k[which].spinner && !spinning ? -1 : round_trip(sock);
		__atomic_store_n(&run.stop, 1, __ATOMIC_RELEASE);
		__atomic_store_n(&spin.stop, 1, __ATOMIC_RELEASE);
		pthread_join(th, NULL);
		if (spinning)
			pthread_join(spin_th, NULL);
		if (med < 0)
			return -1;
		if (best[which] < 0 || med < best[which])
			best[which] = med;
	}
	return 0;
}

/*
 * The child faulting, served by rounds of kinds k[0] and k[1]: true and
 * best[] if measured, else false and why says what stood in the way.
 */
static bool run_probe(const struct round_kind k[2], long long best[2], char *why, size_t len)
{
	struct sibling_probe sp = {.uffd = -1};
	int sv[2];
	bool ok = false;

	if (!two_cpus(sp.cpu)) {
		snprintf(why, len, "one CPU");
		return false;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		snprintf(why, len, "probe not run (socketpair: %s)", strerror(errno));
		return false;
	}
	pid_t pid = fork();
	if (pid == 0) {
		close(sv[0]);
		child(sv[1], sp.cpu[0]);
	}
	close(sv[1]);
	if (pid < 0) {
		snprintf(why, len, "probe not run (fork: %s)", strerror(errno));
		close(sv[0]);
		return false;
	}
	sp.uffd = recv_fd(sv[0]);
	int fl = sp.uffd >= 0 ? fcntl(sp.uffd, F_GETFL) : -1;
	if (fl < 0 || fcntl(sp.uffd, F_SETFL, fl | O_NONBLOCK))
		snprintf(why, len, "probe not run (no userfaultfd from the child)");
	else if (measure(&sp, sv[0], k, best))
		snprintf(why, len, "probe failed (a round gave no answer)");
	else
		ok = true;
	close(sv[0]); /* the child reads EOF and exits */
	if (sp.uffd >= 0)
		close(sp.uffd);
	kill(pid, SIGKILL); /* done or stuck: either way it has nothing more to say */
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	return ok;
}

/*
 * Whether workers may share the CPUs.  *measured: the answer is the probe's,
 * and figs holds its figures only; otherwise figs says what stood in its way
 * and which way that decides.
 */
static bool measure_share(char *figs, size_t len, bool *measured)
{
	static const struct round_kind k[2] = {{.spinner = false}, {.spinner = true}};
	long long best[2];
	char why[100];

	if (!run_probe(k, best, why, sizeof(why))) {
		bool one = !strcmp(why, "one CPU");
		snprintf(figs, len, "%s: workers %s", why, one ? "wait for a calm spell" : "share");
		return !one;
	}
	*measured = true;
	snprintf(figs, len, "probe of %d x %d faults, p10 %.1f us alone, %.1f us beside an idle-time thread (%.2fx)",
		 PROBE_ROUNDS, PROBE_FAULTS, best[0] / 1e3, best[1] / 1e3, (double)best[1] / (double)best[0]);
	return best[1] <= SHARE_MAX_COST * best[0];
}

/* Whether the fault thread follows the faulting thread's CPU; as measure_share(). */
static bool measure_follow(char *figs, size_t len, bool *measured)
{
	static const struct round_kind k[2] = {{.same_cpu = false, .sleeping = false},
					       {.same_cpu = true, .sleeping = true}};
	long long best[2];
	char why[100];

	if (!run_probe(k, best, why, sizeof(why))) {
		snprintf(figs, len, "%s: the fault thread runs anywhere", why);
		return false;
	}
	*measured = true;
	snprintf(figs, len,
		 "probe of %d x %d faults, p10 %.1f us served from the other CPU, %.1f us from the faulting "
		 "thread's (%.2fx)",
		 PROBE_ROUNDS, PROBE_FAULTS, best[0] / 1e3, best[1] / 1e3, (double)best[0] / (double)best[1]);
	return best[1] * FOLLOW_MIN_GAIN < best[0];
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

/* The cached answer in path, if it is this boot's: "boot_id\n0|1\nwhy\n". */
static bool cached(const char *path, const char *id, bool *answer, char *why, size_t len)
{
	char line[3][256];
	FILE *f = fopen(path, "re");
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
	*answer = line[1][0] == '1';
	snprintf(why, len, "%s (this boot's probe, %s)", line[2], path);
	return true;
}

static void cache(const char *path, const char *id, bool answer, const char *why)
{
	char tmp[PATH_MAX];

	if (mkdir(PROBE_CACHE_DIR, 0755) && errno != EEXIST)
		return;
	snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid());
	FILE *f = fopen(tmp, "we");
	if (!f)
		return;
	bool ok = fprintf(f, "%s\n%d\n%s\n", id, answer, why) > 0;
	if (fclose(f) || !ok || rename(tmp, path))
		unlink(tmp);
}

/* One question for the probe, and how its answers read. */
struct question {
	const char *cache;			 /* PROBE_CACHE_DIR/... */
	bool (*measure)(char *, size_t, bool *); /* measure_share() or measure_follow() */
	bool doubted;				 /* this answer is not trusted if measured while busy */
	const char *yes, *no;			 /* for the log */
};

/*
 * An answer measured while other tasks were runnable is doubted where the
 * other task, on the child's CPU, makes it look right: such a run answers no
 * and keeps nothing.  Any other measurement is kept for the boot.
 */
static bool ask(const struct question *q, char *why, size_t len)
{
	char id[64];
	bool answer, have_id = boot_id(id, sizeof(id));

	if (have_id && cached(q->cache, id, &answer, why, len))
		return answer;
	char figs[200];
	bool measured = false;
	int busy = runnable();
	answer = q->measure(figs, sizeof(figs), &measured);
	if (!measured) { /* a failed probe, or one CPU (our affinity, not the host): not kept */
		snprintf(why, len, "%s", figs);
		return answer;
	}
	if (answer == q->doubted && busy > 1) {
		snprintf(why, len, "%s: %d tasks ran beside the %s", q->no, busy, figs);
		return false;
	}
	snprintf(why, len, "%s: %s", answer ? q->yes : q->no, figs);
	if (have_id)
		cache(q->cache, id, answer, why);
	return answer;
}

bool lr_probe_workers_share(char *why, size_t len)
{
	/*
	 * "Share" found while someone else's task ran on the child's CPU: that
	 * task makes faults "alone" as slow as beside the spinner, and workers
	 * beside faults where they should wait cost the program's faults several
	 * times over.
	 */
	static const struct question q = {PROBE_CACHE_DIR "/workers-beside-faults", measure_share, true,
					  "workers share the CPUs with faults", "workers wait for a calm spell"};

	return ask(&q, why, len);
}

bool lr_probe_follow(char *why, size_t len)
{
	/* "Anywhere" found while someone else's task ran on the child's CPU: it slowed the server there. */
	static const struct question q = {PROBE_CACHE_DIR "/fault-cpu", measure_follow, false,
					  "the fault thread follows the faulting thread's CPU",
					  "the fault thread runs on any CPU"};

	return ask(&q, why, len);
}

// SPDX-License-Identifier: MIT
/*
 * Huge pages back (thp.h): which extents were THP-eligible at dump time, and
 * their collapse once all is resident, by a sweep thread beside the fault thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "plugin/engine/internal.h"
#include "plugin/engine/thp.h"
#include "plugin/log/log.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
#define THP_SIZE  (2UL << 20)
#define THP_BATCH 16U /* extents in one collapse call at most (one LRU drain of every CPU per call) */
#define THP_SYSFS "/sys/kernel/mm/transparent_hugepage/enabled"

struct thp_task {
	struct lr_task *t;
	const struct img_mm *mm;
	int pidfd;	/* -1: pid unknown, nothing is collapsed */
	uint64_t *done; /* collapsed extents (run-time addresses) */
	size_t nr_done, cap_done;
};

/* A claim completed by the fault thread or a worker, to look at later. */
struct thp_claim {
	struct lr_task *t;
	uint64_t start, img, len;
};

/* An extent to collapse: run-time address s of task v[task]. */
struct thp_ext {
	size_t task;
	uint64_t s;
};

struct lr_thp {
	pthread_mutex_t lock; /* the fields below; never taken inside the engine lock */
	struct thp_claim *q;  /* deferred claims */
	size_t nr_q, cap_q;
	bool always;	   /* THP "always": eligible unless MADV_NOHUGEPAGE */
	bool refused;	   /* the syscall itself is refused (EPERM, ENOSYS, EINVAL): stop trying */
	bool inline_sweep; /* the fault thread sweeps itself: it serves faults between two calls */
	bool swept;	   /* atomic: the sweep thread is done */
	bool sweeper_started;
	pthread_t sweeper;
	struct thp_task *v;
	size_t nr, cap;
};

enum lr_thp_mode lr_thp_mode(void)
{
	char buf[128] = "";
	int fd = open(THP_SYSFS, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return LR_THP_UNKNOWN;
	if (strstr(buf, "[always]"))
		return LR_THP_ALWAYS;
	return strstr(buf, "[madvise]") ? LR_THP_MADVISE : LR_THP_NEVER;
}

static bool vma_eligible(const struct lr_thp *h, const struct img_mm *mm, const struct img_vma *v)
{
	if (mm->thp_disabled || !img_vma_can_be_lazy(v) || (v->madv & (1ULL << MADV_NOHUGEPAGE)))
		return false;
	return (v->madv & (1ULL << MADV_HUGEPAGE)) || h->always;
}

/* The eligible dump-time VMA holding the whole extent at img, or NULL. */
static const struct img_vma *extent_vma(const struct lr_thp *h, const struct img_mm *mm, uint64_t img)
{
	long i = img_find_vma(mm, img);

	if (i < 0 || mm->vmas[i].end < img + THP_SIZE || !vma_eligible(h, mm, &mm->vmas[i]))
		return NULL;
	return &mm->vmas[i];
}

static struct lr_thp *thp_get(struct lr_engine *e)
{
	struct lr_thp *h = e->thp;

	if (!h) { /* engine lock held; others load it atomically */
		h = calloc(1, sizeof(*h));
		if (!h)
			return NULL;
		pthread_mutex_init(&h->lock, NULL);
		h->always = lr_thp_mode() == LR_THP_ALWAYS;
		__atomic_store_n(&e->thp, h, __ATOMIC_RELEASE);
	}
	return h;
}

static uint64_t count_extents(const struct lr_thp *h, const struct img_mm *mm)
{
	uint64_t n = 0;

	for (size_t i = 0; i < mm->nr_vmas; i++) {
		const struct img_vma *v = &mm->vmas[i];
		uint64_t s = (v->start + THP_SIZE - 1) & ~(THP_SIZE - 1), end = v->end & ~(THP_SIZE - 1);
		if (vma_eligible(h, mm, v) && end > s)
			n += (end - s) / THP_SIZE;
	}
	return n;
}

void lr_thp_add_task(struct lr_engine *e, struct lr_task *t, const struct img_mm *mm)
{
	struct lr_thp *h = thp_get(e);

	if (!h) {
		pr_warn("task %u: out of memory: its huge pages are not collapsed", t->vpid);
		return;
	}
	uint64_t n = count_extents(h, mm);
	if (!n)
		return;
	pthread_mutex_lock(&h->lock);
	if (h->nr == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 8;
		struct thp_task *v = realloc(h->v, cap * sizeof(*v));
		if (!v) {
			pthread_mutex_unlock(&h->lock);
			pr_warn("task %u: out of memory: its huge pages are not collapsed", t->vpid);
			return;
		}
		h->v = v;
		h->cap = cap;
	}
	struct thp_task *tt = &h->v[h->nr];
	*tt = (struct thp_task){.t = t, .mm = mm, .pidfd = -1};
	__atomic_store_n(&h->nr, h->nr + 1, __ATOMIC_RELEASE);
	if (t->real_pid > 0) {
		tt->pidfd = (int)syscall(SYS_pidfd_open, t->real_pid, 0);
		if (tt->pidfd < 0)
			pr_warn("task %u (pid %d): pidfd_open: %m: its huge pages are not collapsed", t->vpid,
				t->real_pid);
	}
	pthread_mutex_unlock(&h->lock);
	e->stats.thp_extents += n; /* engine lock held */
	pr_info("task %u: %llu THP-eligible 2 MiB extents (%s)", t->vpid, (unsigned long long)n,
		h->always ? "THP always" : "MADV_HUGEPAGE");
}

static long find_task(const struct lr_thp *h, const struct lr_task *t)
{
	for (size_t i = 0; i < h->nr; i++)
		if (h->v[i].t == t)
			return (long)i;
	return -1;
}

/* Engine lock held: no page of [s, s+THP_SIZE) pending or in a copier's hands. */
static bool extent_installed(struct lr_engine *e, struct lr_task *t, uint64_t s)
{
	if (t->gone || lr_ranges_overlap(&t->pending, s, s + THP_SIZE))
		return false;
	for (unsigned k = 0; k < NR_CLAIMS; k++) {
		const struct lr_claim *c = &e->claims[k];
		if (c->t == t && !c->cancelled && c->start + __atomic_load_n(&c->done, __ATOMIC_ACQUIRE) < c->end &&
		    c->start < s + THP_SIZE && c->end > s)
			return false;
	}
	return true;
}

static bool was_done(const struct thp_task *tt, uint64_t s)
{
	for (size_t i = tt->nr_done; i-- > 0;)
		if (tt->done[i] == s)
			return true;
	return false;
}

/* Note s as collapsed (or being collapsed); false if out of memory (then it may be tried twice). */
static bool mark_done(struct thp_task *tt, uint64_t s)
{
	if (tt->nr_done == tt->cap_done) {
		size_t cap = tt->cap_done ? tt->cap_done * 2 : 64;
		uint64_t *d = realloc(tt->done, cap * sizeof(*d));
		if (!d)
			return false;
		tt->done = d;
		tt->cap_done = cap;
	}
	tt->done[tt->nr_done++] = s;
	return true;
}

static void unmark_done(struct thp_task *tt, uint64_t s)
{
	for (size_t i = tt->nr_done; i-- > 0;)
		if (tt->done[i] == s) {
			tt->done[i] = tt->done[--tt->nr_done];
			return;
		}
}

/*
 * MADV_COLLAPSE holds the target's mmap lock for writing while it copies the
 * extent: every fault of the program waits until it is done.  The calls run at
 * the program's own priority: a real-time caller (the fault thread of a remote
 * restore) would starve the program, an idle-time one stall it.  The sweep runs
 * after the prefetch, when the engine only winds down: the sweeping thread
 * drops to it once, for good.  The system calls, not pthread_*schedparam():
 * see prefetch.c's sched_set().
 */
static void program_priority(void)
{
	struct sched_param sp = {.sched_priority = 0};
	int policy = sched_getscheduler(0);

	errno = 0;
	int nice = getpriority(PRIO_PROCESS, (id_t)gettid());
	if (nice == -1 && errno)
		nice = 0;
	if (policy == SCHED_OTHER && nice <= 0)
		return;
	if (sched_setscheduler(0, SCHED_OTHER, &sp) || setpriority(PRIO_PROCESS, (id_t)gettid(), 0))
		pr_debug("huge-page collapses keep the sweeping thread's priority: %m");
}

/*
 * A sweep on the fault thread itself (no thread of its own): faults that come
 * meanwhile (pages never dumped, read as zero) are served between two
 * collapses, not after the last (in a 1 GiB restore that was a second's stall).
 */
static void serve_faults(struct lr_engine *e)
{
	struct epoll_event ev;

	if (e->remote || !lr_fault_waiting(e))
		return;
	lr_take_ready(e, &ev); /* every uffd is drained below */
	for (size_t i = 0;; i++) {
		pthread_mutex_lock(&e->lock);
		struct lr_task *t = i < e->nr_tasks ? e->tasks[i] : NULL;
		bool skip = !t || t->gone || lr_stage(e) == STAGE_FAILED;
		pthread_mutex_unlock(&e->lock);
		if (!t)
			return;
		if (!skip && lr_drain_uffd(e, t))
			return; /* the engine failed: lr_engine_fail() said why */
	}
}

/*
 * thp lock held, dropped around the syscall: the fault thread takes it to
 * hand a claim over, and must not wait for a collapse.  Collapse the n
 * extents from run-time address s of task h->v[i], none of them done yet,
 * in one call (MADV_COLLAPSE first drains the LRU caches of every CPU,
 * waiting for a kworker on each: once a call, not once an extent).  A run
 * that fails is tried extent by extent: the call reports no partial success.
 */
static void collapse(struct lr_engine *e, struct lr_thp *h, size_t i, uint64_t s, unsigned n)
{
	struct iovec iov = {.iov_base = (void *)(uintptr_t)s, .iov_len = n * THP_SIZE};
	struct thp_task *tt = &h->v[i];
	unsigned marked = 0;
	long r;

	if (h->refused || tt->pidfd < 0 || lr_stage(e) == STAGE_FAILED) /* failed: the tree is killed */
		return;
	while (marked < n && mark_done(tt, s + marked * THP_SIZE)) /* no other thread tries them meanwhile */
		marked++;
	int pidfd = tt->pidfd;
	uint32_t vpid = tt->t->vpid;
	bool serve = h->inline_sweep;
	pthread_mutex_unlock(&h->lock);
	double t0 = lr_now();
	do
		r = syscall(SYS_process_madvise, pidfd, &iov, 1, MADV_COLLAPSE, 0);
	while (r < 0 && errno == EINTR);
	int er = errno;
	double ms = (lr_now() - t0) * 1e3;
	__atomic_fetch_add(&e->stats.thp_collapse_ns, (uint64_t)(ms * 1e6), __ATOMIC_RELAXED);
	if (serve)
		serve_faults(e);
	pthread_mutex_lock(&h->lock);
	tt = &h->v[i]; /* lr_thp_add_task() may have moved the array */
	if (r == (long)iov.iov_len) {
		__atomic_fetch_add(&e->stats.thp_collapsed, n, __ATOMIC_RELAXED);
		pr_debug("task %u: %u extents from 0x%llx collapsed in %.3f ms", vpid, n, (unsigned long long)s, ms);
		return;
	}
	for (unsigned k = 0; k < marked; k++)
		unmark_done(tt, s + k * THP_SIZE);
	if (er == ESRCH) {
		__atomic_fetch_add(&e->stats.thp_failed, n, __ATOMIC_RELAXED);
		return;
	}
	if (er == EPERM || er == ENOSYS) {
		__atomic_fetch_add(&e->stats.thp_failed, n, __ATOMIC_RELAXED);
		pr_warn("process_madvise(MADV_COLLAPSE) on task %u at 0x%llx: %s: huge pages are not collapsed", vpid,
			(unsigned long long)s, strerror(er));
		h->refused = true;
		return;
	}
	if (n > 1) {
		for (unsigned k = 0; k < n; k++)
			if (!was_done(&h->v[i], s + k * THP_SIZE))
				collapse(e, h, i, s + k * THP_SIZE, 1);
		return;
	}
	__atomic_fetch_add(&e->stats.thp_failed, 1, __ATOMIC_RELAXED);
	/*
	 * EBUSY: an empty or zero-page PTE (never dumped, or dropped by the program);
	 * EAGAIN/ENOMEM: no huge page now; EINVAL: the VMA is not THP-able any more.
	 */
	pr_debug("task %u: collapse of 0x%llx refused after %.3f ms: %s", vpid, (unsigned long long)s, ms,
		 strerror(er));
}

/* thp lock held: collapse the extents of ext (sorted, not done when collected) in runs of THP_BATCH. */
static void collapse_runs(struct lr_engine *e, struct lr_thp *h, const struct thp_ext *ext, size_t nr)
{
	for (size_t k = 0; k < nr;) {
		size_t i = ext[k].task;
		unsigned n = 0;
		/* skip what another thread did meanwhile */
		while (k < nr && ext[k].task == i && was_done(&h->v[i], ext[k].s))
			k++;
		if (k == nr || ext[k].task != i)
			continue;
		uint64_t s = ext[k].s;
		while (k < nr && ext[k].task == i && ext[k].s == s + n * THP_SIZE && n < THP_BATCH &&
		       !was_done(&h->v[i], ext[k].s)) {
			n++;
			k++;
		}
		collapse(e, h, i, s, n);
	}
}

static int cmp_ext(const void *a, const void *b)
{
	const struct thp_ext *x = a, *y = b;

	if (x->task != y->task)
		return x->task < y->task ? -1 : 1;
	return x->s < y->s ? -1 : x->s > y->s;
}

/* A claim the fault thread or a worker completed, for later. */
static void defer(struct lr_thp *h, struct lr_task *t, uint64_t start, uint64_t img, uint64_t len)
{
	pthread_mutex_lock(&h->lock);
	if (h->nr_q == h->cap_q) {
		size_t cap = h->cap_q ? h->cap_q * 2 : 16;
		struct thp_claim *q = realloc(h->q, cap * sizeof(*q));
		if (!q) { /* the sweep at the end still collapses it */
			pthread_mutex_unlock(&h->lock);
			return;
		}
		h->q = q;
		h->cap_q = cap;
	}
	h->q[h->nr_q++] = (struct thp_claim){t, start, img, len};
	pthread_mutex_unlock(&h->lock);
}

/*
 * The whole extents of the deferred claims that are installed and eligible,
 * collapsed in runs.  Each caller takes the queue as it finds it; the done
 * marks keep two threads from collapsing one extent.
 */
static void drain(struct lr_engine *e, struct lr_thp *h)
{
	pthread_mutex_lock(&h->lock);
	struct thp_claim *q = h->q;
	size_t nr_q = h->nr_q, nr = 0, cap = 0;
	h->q = NULL;
	h->nr_q = h->cap_q = 0;
	for (size_t k = 0; k < nr_q; k++)
		cap += (q[k].len + 2 * THP_SIZE - 1) / THP_SIZE;
	pthread_mutex_unlock(&h->lock);
	struct thp_ext *ext = malloc((cap ? cap : 1) * sizeof(*ext));
	if (!ext) { /* the sweep at the end still collapses them */
		free(q);
		return;
	}
	for (size_t k = 0; k < nr_q; k++) {
		const struct thp_claim *c = &q[k];
		if ((c->start ^ c->img) & (THP_SIZE - 1)) /* moved off its alignment: never huge */
			continue;
		for (uint64_t s = c->start & ~(THP_SIZE - 1); s < c->start + c->len; s += THP_SIZE) {
			/* the engine lock never inside the thp lock: lr_thp_add_task() nests the other way */
			pthread_mutex_lock(&e->lock);
			bool whole = extent_installed(e, c->t, s);
			pthread_mutex_unlock(&e->lock);
			if (!whole)
				continue;
			pthread_mutex_lock(&h->lock);
			long i = find_task(h, c->t);
			if (i >= 0 && extent_vma(h, h->v[i].mm, c->img - (c->start - s)) && !was_done(&h->v[i], s))
				ext[nr++] = (struct thp_ext){(size_t)i, s};
			pthread_mutex_unlock(&h->lock);
		}
	}
	free(q);
	qsort(ext, nr, sizeof(*ext), cmp_ext);
	size_t u = 0; /* an extent two claims completed comes twice */
	for (size_t k = 0; k < nr; k++)
		if (!u || cmp_ext(&ext[u - 1], &ext[k]))
			ext[u++] = ext[k];
	nr = u;
	pthread_mutex_lock(&h->lock);
	collapse_runs(e, h, ext, nr);
	pthread_mutex_unlock(&h->lock);
	free(ext);
}

void lr_thp_claim_done(struct lr_engine *e, struct lr_task *t, uint64_t start, uint64_t img, uint64_t len)
{
	struct lr_thp *h = __atomic_load_n(&e->thp, __ATOMIC_ACQUIRE);

	if (h && __atomic_load_n(&h->nr, __ATOMIC_ACQUIRE))
		defer(h, t, start, img, len);
}

long lr_anon_huge_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;

	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "AnonHugePages:", 14))
			kib = strtol(line + 14, NULL, 10);
	fclose(f);
	return kib;
}

/* AnonHugePages of a live task, kB; -1 if unknown.  The pidfd proves the pid was not reused. */
static long task_huge_kib(const struct thp_task *tt)
{
	if (tt->t->real_pid <= 0)
		return -1;
	long kib = lr_anon_huge_kib(tt->t->real_pid);
	if (tt->pidfd >= 0 && syscall(SYS_pidfd_send_signal, tt->pidfd, 0, NULL, 0))
		return -1;
	return kib;
}

/* The deferred claims, then every eligible extent not collapsed yet; AnonHugePages per task. */
static void sweep(struct lr_engine *e, struct lr_thp *h)
{
	program_priority();
	drain(e, h);
	pthread_mutex_lock(&h->lock);
	/* Extents completed by faults: their run-time address is their dump-time one unless remapped. */
	bool same = !__atomic_load_n(&e->stats.remaps, __ATOMIC_RELAXED);
	for (size_t i = 0; i < h->nr; i++) {
		const struct img_mm *mm = h->v[i].mm;
		for (size_t k = 0; same && k < mm->nr_vmas; k++) { /* a gone task: ESRCH */
			const struct img_vma *v = &mm->vmas[k];
			if (!vma_eligible(h, mm, v))
				continue;
			struct thp_ext run[THP_BATCH];
			size_t n = 0;
			uint64_t s = (v->start + THP_SIZE - 1) & ~(THP_SIZE - 1);
			for (; s + THP_SIZE <= v->end; s += THP_SIZE) {
				if (!was_done(&h->v[i], s))
					run[n++] = (struct thp_ext){i, s};
				if (n == THP_BATCH) {
					collapse_runs(e, h, run, n);
					n = 0;
				}
			}
			collapse_runs(e, h, run, n);
		}
		struct thp_task *tt = &h->v[i];
		long kib = task_huge_kib(tt);
		if (e->stats.thp_nr < LR_STATS_THP_TASKS) {
			e->stats.thp_task[e->stats.thp_nr].pid = tt->t->vpid;
			e->stats.thp_task[e->stats.thp_nr++].kib = kib;
		}
		pr_info("task %u: AnonHugePages %ld kB after restore", tt->t->vpid, kib);
	}
	if (!same && h->nr)
		pr_info("remapped ranges: extents completed by faults are not collapsed");
	pthread_mutex_unlock(&h->lock);
}

static void *sweeper(void *arg)
{
	struct lr_engine *e = arg;
	struct lr_thp *h = e->thp;

	sweep(e, h);
	__atomic_store_n(&h->swept, true, __ATOMIC_SEQ_CST);
	lr_engine_kick(e);
	return NULL;
}

bool lr_thp_sweep_start(struct lr_engine *e)
{
	struct lr_thp *h = __atomic_load_n(&e->thp, __ATOMIC_ACQUIRE);

	if (!h || !__atomic_load_n(&h->nr, __ATOMIC_ACQUIRE)) /* no task with an eligible extent */
		return false;
	if (!e->remote) {
		if (!pthread_create(&h->sweeper, NULL, sweeper, e)) {
			h->sweeper_started = true;
			return true;
		}
		pr_warn("no thread for the huge-page collapses: the fault thread does them between faults");
	}
	h->inline_sweep = true;
	sweep(e, h);
	h->inline_sweep = false;
	return false;
}

bool lr_thp_sweep_done(struct lr_engine *e)
{
	struct lr_thp *h = e->thp;

	return !h || __atomic_load_n(&h->swept, __ATOMIC_SEQ_CST);
}

void lr_thp_sweep_join(struct lr_engine *e)
{
	struct lr_thp *h = e->thp;

	if (h && h->sweeper_started) {
		pthread_join(h->sweeper, NULL);
		h->sweeper_started = false;
	}
}

void lr_thp_free(struct lr_engine *e)
{
	struct lr_thp *h = e->thp;

	if (!h)
		return;
	for (size_t i = 0; i < h->nr; i++) {
		if (h->v[i].pidfd >= 0)
			close(h->v[i].pidfd);
		free(h->v[i].done);
	}
	free(h->v);
	free(h->q);
	pthread_mutex_destroy(&h->lock);
	free(h);
	e->thp = NULL;
}

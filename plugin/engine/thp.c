// SPDX-License-Identifier: MIT
/*
 * Huge pages back (thp.h): which extents were THP-eligible at dump time, and
 * their collapse once installed, from the copier that completed them.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
#define THP_SYSFS "/sys/kernel/mm/transparent_hugepage/enabled"

struct thp_task {
	struct lr_task *t;
	const struct img_mm *mm;
	int pidfd;	/* -1: pid unknown, nothing is collapsed */
	uint64_t *done; /* collapsed extents (run-time addresses) */
	size_t nr_done, cap_done;
};

/* A claim the fault thread completed, for a worker to look at. */
struct thp_claim {
	struct lr_task *t;
	uint64_t start, img, len;
};

struct lr_thp {
	pthread_mutex_t lock; /* the fields below; never taken inside the engine lock */
	struct thp_claim *q;  /* deferred claims */
	size_t nr_q, cap_q;
	bool always;  /* THP "always": eligible unless MADV_NOHUGEPAGE */
	bool refused; /* the syscall itself is refused (EPERM, ENOSYS, EINVAL): stop trying */
	struct thp_task *v;
	size_t nr, cap;
};

static bool thp_always(void)
{
	char buf[128] = "";
	int fd = open(THP_SYSFS, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);

	if (fd >= 0)
		close(fd);
	return n > 0 && strstr(buf, "[always]");
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
		h->always = thp_always();
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

static struct thp_task *find_task(struct lr_thp *h, const struct lr_task *t)
{
	for (size_t i = 0; i < h->nr; i++)
		if (h->v[i].t == t)
			return &h->v[i];
	return NULL;
}

/* Engine lock held: no page of [s, s+THP_SIZE) pending or in a copier's hands. */
static bool extent_installed(struct lr_engine *e, struct lr_task *t, uint64_t s)
{
	const struct lr_ranges *r = &t->pending;
	size_t lo = 0, hi = r->nr;

	if (t->gone)
		return false;
	while (lo < hi) { /* first range ending after s */
		size_t mid = lo + (hi - lo) / 2;
		if (r->v[mid].end <= s)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < r->nr && r->v[lo].start < s + THP_SIZE)
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

/* thp lock held.  Collapse the extent at run-time address s (once). */
static void collapse(struct lr_engine *e, struct lr_thp *h, struct thp_task *tt, uint64_t s)
{
	struct iovec iov = {.iov_base = (void *)(uintptr_t)s, .iov_len = THP_SIZE};
	double t0 = lr_now();
	long n;

	if (h->refused || tt->pidfd < 0 || was_done(tt, s))
		return;
	do
		n = syscall(SYS_process_madvise, tt->pidfd, &iov, 1, MADV_COLLAPSE, 0);
	while (n < 0 && errno == EINTR);
	int er = errno;
	__atomic_fetch_add(&e->stats.thp_collapse_ns, (uint64_t)((lr_now() - t0) * 1e9), __ATOMIC_RELAXED);
	if (n == (long)THP_SIZE) {
		__atomic_fetch_add(&e->stats.thp_collapsed, 1, __ATOMIC_RELAXED);
		if (tt->nr_done == tt->cap_done) {
			size_t cap = tt->cap_done ? tt->cap_done * 2 : 64;
			uint64_t *d = realloc(tt->done, cap * sizeof(*d));
			if (!d)
				return; /* only a repeated (harmless) collapse later */
			tt->done = d;
			tt->cap_done = cap;
		}
		tt->done[tt->nr_done++] = s;
		return;
	}
	__atomic_fetch_add(&e->stats.thp_failed, 1, __ATOMIC_RELAXED);
	if (er == ESRCH)
		return;
	if (er == EPERM || er == ENOSYS) {
		pr_warn("process_madvise(MADV_COLLAPSE) on task %u at 0x%llx: %s: huge pages are not collapsed",
			tt->t->vpid, (unsigned long long)s, strerror(er));
		h->refused = true;
		return;
	}
	/*
	 * EBUSY: an empty or zero-page PTE (never dumped, or dropped by the program);
	 * EAGAIN/ENOMEM: no huge page now; EINVAL: the VMA is not THP-able any more.
	 */
	pr_debug("task %u: collapse of 0x%llx refused: %s", tt->t->vpid, (unsigned long long)s, strerror(er));
}

static void claim_done(struct lr_engine *e, struct lr_thp *h, struct lr_task *t, uint64_t start, uint64_t img,
		       uint64_t len)
{
	if ((start ^ img) & (THP_SIZE - 1)) /* moved off its alignment: never huge */
		return;
	for (uint64_t s = start & ~(THP_SIZE - 1); s < start + len; s += THP_SIZE) {
		pthread_mutex_lock(&e->lock); /* never inside the thp lock: lr_thp_add_task() nests the other way */
		bool whole = extent_installed(e, t, s);
		pthread_mutex_unlock(&e->lock);
		if (!whole)
			continue;
		pthread_mutex_lock(&h->lock);
		struct thp_task *tt = find_task(h, t);
		if (tt && extent_vma(h, tt->mm, img - (start - s)))
			collapse(e, h, tt, s);
		pthread_mutex_unlock(&h->lock);
	}
}

/* A collapse takes a millisecond or so: the fault thread leaves it to a worker (or to the end). */
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

static void drain(struct lr_engine *e, struct lr_thp *h)
{
	for (;;) {
		pthread_mutex_lock(&h->lock);
		struct thp_claim c = h->nr_q ? h->q[--h->nr_q] : (struct thp_claim){0};
		pthread_mutex_unlock(&h->lock);
		if (!c.t)
			return;
		claim_done(e, h, c.t, c.start, c.img, c.len);
	}
}

void lr_thp_claim_done(struct lr_engine *e, struct lr_task *t, uint64_t start, uint64_t img, uint64_t len, bool later)
{
	struct lr_thp *h = __atomic_load_n(&e->thp, __ATOMIC_ACQUIRE);

	if (!h || !__atomic_load_n(&h->nr, __ATOMIC_ACQUIRE))
		return;
	if (later) {
		defer(h, t, start, img, len);
		return;
	}
	drain(e, h);
	claim_done(e, h, t, start, img, len);
}

/* AnonHugePages of a live task, kB; -1 if unknown.  The pidfd proves the pid was not reused. */
static long anon_huge_kib(const struct thp_task *tt)
{
	char path[64], line[256];
	long kib = -1;

	if (tt->t->real_pid <= 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", tt->t->real_pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "AnonHugePages:", 14))
			kib = strtol(line + 14, NULL, 10);
	fclose(f);
	if (tt->pidfd >= 0 && syscall(SYS_pidfd_send_signal, tt->pidfd, 0, NULL, 0))
		return -1;
	return kib;
}

void lr_thp_finish(struct lr_engine *e)
{
	struct lr_thp *h = __atomic_load_n(&e->thp, __ATOMIC_ACQUIRE);

	if (!h)
		return;
	drain(e, h);
	pthread_mutex_lock(&h->lock);
	/* Extents completed by faults: their run-time address is their dump-time one unless remapped. */
	bool same = !__atomic_load_n(&e->stats.remaps, __ATOMIC_RELAXED);
	for (size_t i = 0; i < h->nr; i++) {
		struct thp_task *tt = &h->v[i];
		for (size_t k = 0; same && k < tt->mm->nr_vmas; k++) { /* a gone task: ESRCH */
			const struct img_vma *v = &tt->mm->vmas[k];
			if (!vma_eligible(h, tt->mm, v))
				continue;
			for (uint64_t s = (v->start + THP_SIZE - 1) & ~(THP_SIZE - 1); s + THP_SIZE <= v->end;
			     s += THP_SIZE)
				collapse(e, h, tt, s);
		}
		long kib = anon_huge_kib(tt);
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

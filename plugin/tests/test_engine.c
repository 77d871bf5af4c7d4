// SPDX-License-Identifier: MIT
/*
 * The whole engine in this process, table-driven: a memory page source, a
 * userfaultfd on the test's own mapping, lr_engine_run() in a thread.  Each
 * row lets the prefetch worker claim a chunk and holds it inside the source's
 * read (outside the copy gate, as a slow read would), then does one thing to
 * the claimed pages -- touch, fork, mremap, MADV_DONTNEED, munmap -- lets the
 * worker go, waits until everything is resident and checks every byte: image
 * data where the mapping kept its pages, zero where they were dropped.  Every
 * row runs with the source copying into buffers and with it mapping, and with
 * a working set whose runs are the claims.  One more
 * case maps MADV_HUGEPAGE and checks that the sweep collapses every extent.
 * Needs a userfaultfd (root, or vm.unprivileged_userfaultfd=1); skipped without.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/uffd-compat.h"
#include "images/ws.h"
#include "plugin/engine/engine.h"
#include "plugin/engine/thp.h"
#include "plugin/engine/ws.h"
#include "plugin/log/log.h"
#include "plugin/source/source.h"

#define PG	    4096UL
#define AREA	    (8UL << 20) /* four prefetch chunks */
#define CHUNK	    (2UL << 20)
#define TRAP_WAIT_S 20

/* ---- a page source over a buffer, whose first read by a prefetch worker waits for the test ---- */

struct mem_source {
	struct page_source base;
	uint64_t vaddr; /* dump-time address of data[0] */
	uint8_t *data;
	pthread_t fault_thread;
	struct lr_engine *engine; /* set before the engine runs */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool armed, hit, released;
	uint64_t hit_vaddr; /* where the held read was */
};

static uint64_t pattern(uint64_t vaddr)
{
	return vaddr * 0x9E3779B97F4A7C15ULL ^ 0x5bd1e995;
}

/*
 * The fault thread prefetching may take the held claim back and install every
 * page before the row acts; the engine then ends, joining the held worker.  The
 * hold ends there too, so that the engine can end and close the uffd (run_engine):
 * the row's fork, mremap or madvise, waiting for its event to be read, goes on.
 */
static bool engine_done(struct mem_source *m)
{
	double t = 0;

	if (m->engine)
		__atomic_load(&lr_engine_stats(m->engine)->t_all_resident, &t, __ATOMIC_ACQUIRE);
	return t != 0;
}

/*
 * A worker's first read: note where, and wait until the test lets it go.  The
 * fault thread's reads wait until a worker holds its claim (no event can be
 * pending before: the test acts only after), so that it cannot take it all.
 */
static void maybe_hold(struct mem_source *m, uint64_t vaddr)
{
	pthread_mutex_lock(&m->lock);
	if (pthread_equal(pthread_self(), m->fault_thread)) {
		while (m->armed)
			pthread_cond_wait(&m->cond, &m->lock);
		pthread_mutex_unlock(&m->lock);
		return;
	}
	if (m->armed) {
		m->armed = false;
		m->hit = true;
		m->hit_vaddr = vaddr;
		pthread_cond_broadcast(&m->cond);
		while (!m->released && !engine_done(m)) {
			struct timespec until;
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_nsec += 5 * 1000 * 1000;
			if (until.tv_nsec >= 1000000000L) {
				until.tv_sec++;
				until.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&m->cond, &m->lock, &until);
		}
	}
	pthread_mutex_unlock(&m->lock);
}

static int mem_check(struct mem_source *m, uint32_t pid, uint64_t vaddr, uint64_t nr, char *err, size_t errlen)
{
	if (pid != 1 || vaddr < m->vaddr || vaddr + nr * PG > m->vaddr + AREA) {
		snprintf(err, errlen, "no data for pid %u at 0x%llx", pid, (unsigned long long)vaddr);
		return -1;
	}
	return 0;
}

static int mem_get(struct page_source *s, uint32_t pid, uint64_t vaddr, uint64_t nr, const void **data, char *err,
		   size_t errlen)
{
	struct mem_source *m = (struct mem_source *)s;

	if (mem_check(m, pid, vaddr, nr, err, errlen))
		return -1;
	maybe_hold(m, vaddr);
	*data = m->data + (vaddr - m->vaddr);
	return 0;
}

static int mem_read(struct page_source *s, uint32_t pid, uint64_t vaddr, uint64_t nr, void *buf, char *err,
		    size_t errlen)
{
	struct mem_source *m = (struct mem_source *)s;

	if (mem_check(m, pid, vaddr, nr, err, errlen))
		return -1;
	maybe_hold(m, vaddr);
	memcpy(buf, m->data + (vaddr - m->vaddr), nr * PG);
	return 0;
}

static void mem_destroy(struct page_source *s)
{
	(void)s;
}

static const struct page_source_ops mem_ops = {.get = mem_get, .read = mem_read, .destroy = mem_destroy};

/* ---- the same bytes asynchronously: completions on a thread of the source's, the first background one held ---- */

#define ASYNC_MAX 4096

struct async_source {
	struct mem_source m; /* first: the engine sees its base */
	pthread_t th;
	struct page_source_req *q[ASYNC_MAX]; /* submitted, not completed: a ring */
	unsigned head, tail;
	struct page_source_req *held;
	bool stop;
	uint64_t watch;	     /* dump-time page whose requests are counted */
	unsigned watch_hits; /* requests that covered it */
	struct {
		bool urgent;
		uint64_t vaddr, nr;
	} seen[4]; /* the first of them, to say which */
};

static int async_submit(struct page_source *s, struct page_source_req *r, char *err, size_t errlen)
{
	struct async_source *a = (struct async_source *)s;

	if (mem_check(&a->m, r->pid, r->vaddr, r->nr_pages, err, errlen))
		return -1;
	pthread_mutex_lock(&a->m.lock);
	if (a->tail - a->head == ASYNC_MAX) {
		pthread_mutex_unlock(&a->m.lock);
		snprintf(err, errlen, "test source: queue full");
		return -1;
	}
	if (a->watch >= r->vaddr && a->watch < r->vaddr + r->nr_pages * PG) {
		if (a->watch_hits < 4) {
			a->seen[a->watch_hits].urgent = r->urgent;
			a->seen[a->watch_hits].vaddr = r->vaddr;
			a->seen[a->watch_hits].nr = r->nr_pages;
		}
		a->watch_hits++;
	}
	a->q[a->tail++ % ASYNC_MAX] = r;
	pthread_cond_broadcast(&a->m.cond);
	pthread_mutex_unlock(&a->m.lock);
	return 0;
}

static void async_complete(struct async_source *a, struct page_source_req *r, int status)
{
	r->status = status;
	if (status)
		snprintf(r->err, sizeof(r->err), "test source stopped");
	else
		memcpy(r->buf, a->m.data + (r->vaddr - a->m.vaddr), r->nr_pages * PG);
	r->done(r);
}

static void *async_thread(void *arg)
{
	struct async_source *a = arg;

	pthread_mutex_lock(&a->m.lock);
	for (;;) {
		if (a->held && a->m.released) {
			struct page_source_req *r = a->held;
			a->held = NULL;
			pthread_mutex_unlock(&a->m.lock);
			async_complete(a, r, 0);
			pthread_mutex_lock(&a->m.lock);
			continue;
		}
		if (a->head == a->tail) {
			if (a->stop)
				break;
			pthread_cond_wait(&a->m.cond, &a->m.lock);
			continue;
		}
		struct page_source_req *r = a->q[a->head++ % ASYNC_MAX];
		if (a->m.armed && !r->urgent) { /* the first background request waits for the test */
			a->m.armed = false;
			a->m.hit = true;
			a->m.hit_vaddr = r->vaddr;
			a->held = r;
			pthread_cond_broadcast(&a->m.cond);
			continue;
		}
		pthread_mutex_unlock(&a->m.lock);
		async_complete(a, r, 0);
		pthread_mutex_lock(&a->m.lock);
	}
	pthread_mutex_unlock(&a->m.lock);
	return NULL;
}

static int async_read(struct page_source *s, uint32_t pid, uint64_t vaddr, uint64_t nr, void *buf, char *err,
		      size_t errlen)
{
	(void)s;
	(void)buf;
	snprintf(err, errlen,
		 "test: the engine read pid %u 0x%llx (%llu pages) synchronously from an asynchronous source", pid,
		 (unsigned long long)vaddr, (unsigned long long)nr);
	return -1;
}

static const struct page_source_ops async_ops = {.read = async_read, .submit = async_submit, .destroy = mem_destroy};

/* The same with an urgent channel that is never up: answers in request order (source.h), as from criu dump. */
static int serial_poll_fd(struct page_source *s, unsigned *gen)
{
	(void)s;
	*gen = 0;
	return -1;
}

static void serial_poll(struct page_source *s)
{
	(void)s;
}

static const struct page_source_ops serial_ops = {
    .read = async_read, .submit = async_submit, .poll_fd = serial_poll_fd, .poll = serial_poll, .destroy = mem_destroy};

/* After the engine is destroyed: what is left completes with an error, the thread ends. */
static void async_stop(struct async_source *a)
{
	pthread_mutex_lock(&a->m.lock);
	a->stop = true;
	a->m.released = true;
	pthread_cond_broadcast(&a->m.cond);
	pthread_mutex_unlock(&a->m.lock);
	assert_int_equal(pthread_join(a->th, NULL), 0);
	for (; a->head != a->tail; a->head++)
		async_complete(a, a->q[a->head % ASYNC_MAX], -1);
}

/* ---- the table ---- */

enum action { NOTHING, TOUCH, FORK, MREMAP, DONTNEED, MUNMAP };

struct row {
	const char *name;
	enum action act;
	uint64_t off, len; /* the part of the held claim acted on */
	/*
	 * The fault thread prefetches too: it copies the rest and may take the
	 * held claim back (steal) before or after the action; either is right.
	 */
	bool own;
};

static const struct row rows[] = {
    {"nothing", NOTHING, 0, 0, false},
    {"touch a claimed page", TOUCH, 5 * PG, PG, false},
    {"fork", FORK, 0, 0, false},
    {"mremap claimed pages away", MREMAP, 0, 512 << 10, false},
    {"mremap the claim's tail away", MREMAP, 1 << 20, 1 << 20, false},
    {"DONTNEED claimed pages", DONTNEED, 64 << 10, 128 << 10, false},
    {"DONTNEED the whole claim", DONTNEED, 0, CHUNK, false},
    {"munmap claimed pages", MUNMAP, 64 << 10, 128 << 10, false},
    {"nothing, fault thread prefetching", NOTHING, 0, 0, true},
    {"fork, fault thread prefetching", FORK, 0, 0, true},
    {"DONTNEED, fault thread prefetching", DONTNEED, 64 << 10, 128 << 10, true},
    {"mremap, fault thread prefetching", MREMAP, 0, 512 << 10, true},
};

struct run {
	struct lr_engine *e;
	int ret;
	struct lr_stats stats; /* as the engine ended */
};

static void *run_engine(void *arg)
{
	struct run *r = arg;
	r->ret = lr_engine_run(r->e);
	r->stats = *lr_engine_stats(r->e);
	lr_engine_destroy(r->e); /* closes uffd: what is still missing reads zero from here on */
	r->e = NULL;
	return NULL;
}

static int new_uffd(void)
{
	return lr_uffd_new(O_CLOEXEC | O_NONBLOCK, UFFD_FEATURE_EVENT_FORK | UFFD_FEATURE_EVENT_REMAP |
						       UFFD_FEATURE_EVENT_REMOVE | UFFD_FEATURE_EVENT_UNMAP);
}

/* A new uffd and an AREA mapping registered with it, no huge pages; skips the test without a uffd. */
static uint8_t *registered_area(int *uffd)
{
	*uffd = new_uffd();
	if (*uffd < 0) {
		print_message("no userfaultfd here (%s): skipped\n", strerror(errno));
		skip();
	}
	uint8_t *area = mmap(NULL, AREA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(area != MAP_FAILED);
	madvise(area, AREA, MADV_NOHUGEPAGE);
	struct uffdio_register reg = {.range = {.start = (uintptr_t)area, .len = AREA},
				      .mode = UFFDIO_REGISTER_MODE_MISSING};
	assert_int_equal(ioctl(*uffd, UFFDIO_REGISTER, &reg), 0);
	return area;
}

/* 0 if every word of [p, p+len) is pattern(dump-time address) or, with zero, 0. */
static uint64_t bad_word(const uint8_t *p, uint64_t len, uint64_t dump_addr, bool zero)
{
	for (uint64_t o = 0; o < len; o += sizeof(uint64_t)) {
		uint64_t want = zero ? 0 : pattern(dump_addr + o);
		if (*(const volatile uint64_t *)(p + o) != want)
			return dump_addr + o;
	}
	return 0;
}

static void wait_hit(struct mem_source *m)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += TRAP_WAIT_S;
	pthread_mutex_lock(&m->lock);
	while (!m->hit)
		if (pthread_cond_timedwait(&m->cond, &m->lock, &until) == ETIMEDOUT)
			break;
	bool hit = m->hit;
	pthread_mutex_unlock(&m->lock);
	assert_true(hit);
}

static void release(struct mem_source *m)
{
	pthread_mutex_lock(&m->lock);
	m->released = true;
	pthread_cond_broadcast(&m->cond);
	pthread_mutex_unlock(&m->lock);
}

/* A thread touching pages of a request in flight: it must wait for the request, then see its data. */
struct touch {
	uint8_t *p;
	uint64_t len, dump_addr, bad;
	bool finished; /* atomic */
};

static void *toucher(void *arg)
{
	struct touch *tc = arg;

	tc->bad = bad_word(tc->p, tc->len, tc->dump_addr, false);
	__atomic_store_n(&tc->finished, true, __ATOMIC_RELEASE);
	return NULL;
}

/* m's bytes: pattern() of each word's dump-time address, the mapping at area. */
static void source_init(struct mem_source *m, uint8_t *area, bool copies)
{
	m->vaddr = (uintptr_t)area;
	m->data = malloc(AREA);
	assert_non_null(m->data);
	for (uint64_t o = 0; o < AREA; o += sizeof(uint64_t))
		*(uint64_t *)(m->data + o) = pattern(m->vaddr + o);
	pthread_mutex_init(&m->lock, NULL);
	pthread_cond_init(&m->cond, NULL);
	snprintf(m->base.choice.why, sizeof(m->base.choice.why), "test");
	m->base.choice.kind = copies ? PAGE_SOURCE_READ : PAGE_SOURCE_MAP;
	m->base.choice.step = 256 << 10;
}

static void source_fini(struct mem_source *m)
{
	free(m->data);
	pthread_mutex_destroy(&m->lock);
	pthread_cond_destroy(&m->cond);
}

/* The images of one task whose one VMA (madvise bits madv) is all lazy pages. */
struct image {
	struct img_vma vma;
	struct img_pme pme;
	struct img_mm mm;
};

static void image_init(struct image *im, uint64_t vaddr, uint64_t madv)
{
	im->vma = (struct img_vma){.start = vaddr,
				   .end = vaddr + AREA,
				   .prot = PROT_READ | PROT_WRITE,
				   .flags = MAP_PRIVATE | MAP_ANONYMOUS,
				   .madv = madv,
				   .status = 1};
	im->pme = (struct img_pme){.vaddr = vaddr, .nr_pages = AREA / PG, .flags = IMG_PE_LAZY | IMG_PE_PRESENT};
	im->mm = (struct img_mm){
	    .pid = 1, .nr_vmas = 1, .vmas = &im->vma, .nr_pmes = 1, .pmes = &im->pme, .pages_bytes = AREA};
}

enum how { COPIES, MAPS, ASYNC, SERIAL, FOLLOWING };

#define WS_NR 96U

/*
 * A working set for pid 1 (ws.c): its first batch in the area's second chunk
 * (so that the held run has a chunk of area after it for the row to act on),
 * in pairs a page apart (one run with the page between), the rest scattered
 * over the whole area; no page twice.
 */
static void use_working_set(struct lr_engine *e, uint64_t vaddr)
{
	static const uint64_t area_pages = AREA / PG, first = CHUNK / PG;
	bool seen[AREA / PG] = {0};
	struct img_ws ws = {.nr_tasks = 1, .tasks = calloc(1, sizeof(struct img_ws_task))};
	uint64_t *pages = calloc(WS_NR, sizeof(*pages));
	unsigned n = 0;

	assert_non_null(ws.tasks);
	assert_non_null(pages);
	for (uint64_t k = 0; n < WS_NR; k++) {
		uint64_t p = n < 32 ? first + (k / 2 * 29) % first + (k % 2) * 2 : (k * 211) % area_pages;
		if (seen[p])
			continue;
		seen[p] = true;
		pages[n++] = vaddr + p * PG;
	}
	ws.tasks[0] = (struct img_ws_task){.pid = 1, .nr = WS_NR, .pages = pages};
	assert_int_equal(lr_ws_use(e, &ws), 0);
}

static void run_row(const struct row *row, enum how how, bool ws)
{
	bool copies = how != MAPS, async = how == ASYNC || how == SERIAL;
	struct async_source as = {.m = {.base = {.ops = how == SERIAL ? &serial_ops
							: async	      ? &async_ops
								      : &mem_ops,
						 .copies = copies}}};
	struct mem_source *m = &as.m;
	struct run r = {0};
	pthread_t th, touch_th;
	struct touch tc = {0};
	int over[2];

	print_message("  row: %s, source %s%s\n", row->name,
		      how == SERIAL	 ? "in order"
		      : how == FOLLOWING ? "copies, the fault thread following this one"
		      : async		 ? "asynchronous"
		      : copies		 ? "copies"
					 : "maps",
		      ws ? ", a working set installed first" : "");
	int uffd;
	uint8_t *area = registered_area(&uffd);

	source_init(m, area, copies);
	m->armed = true;
	if (async)
		assert_int_equal(pthread_create(&as.th, NULL, async_thread, &as), 0);
	struct image im;
	image_init(&im, m->vaddr, 0);

	/* following: a worker near the fault thread and one away from it (follow.c) */
	struct lr_engine_opts o = {
	    .workers = how == FOLLOWING ? 2 : 1, .faults_only = !row->own, .follow = how == FOLLOWING};
	r.e = lr_engine_create(&m->base, &o);
	assert_non_null(r.e);
	/* the restore is "over" (the fault thread prefetches too) only when the test says so */
	assert_int_equal(pipe2(over, O_CLOEXEC), 0);
	assert_int_equal(lr_engine_watch_restore(r.e, over[0]), 0);
	if (ws)
		use_working_set(r.e, m->vaddr);
	assert_int_equal(lr_engine_add_task(r.e, 1, how == FOLLOWING ? getpid() : 0, uffd, &im.mm), 0);
	m->engine = r.e;
	pthread_mutex_lock(&m->lock); /* before the marker: the fault thread reads no page before it */
	assert_int_equal(pthread_create(&th, NULL, run_engine, &r), 0);
	m->fault_thread = th;
	pthread_mutex_unlock(&m->lock);
	lr_engine_restore_finished(r.e);
	wait_hit(m);

	/* the worker holds a claim of CHUNK bytes from m->hit_vaddr */
	uint8_t *claim = area + (m->hit_vaddr - m->vaddr);
	uint8_t *moved = NULL;
	pid_t child = -1;
	switch (row->act) {
	case NOTHING:
		break;
	case TOUCH:
		if (!async) {
			assert_int_equal(bad_word(claim + row->off, row->len, m->hit_vaddr + row->off, false), 0);
			break;
		}
		/*
		 * the page is in a background request held in flight: it is asked
		 * again, urgently, once (remote.c), and the toucher is served
		 * from that answer while the first stays held
		 */
		pthread_mutex_lock(&m->lock);
		as.watch = m->hit_vaddr + row->off;
		as.watch_hits = 0;
		pthread_mutex_unlock(&m->lock);
		tc.p = claim + row->off;
		tc.len = row->len;
		tc.dump_addr = m->hit_vaddr + row->off;
		assert_int_equal(pthread_create(&touch_th, NULL, toucher, &tc), 0);
		/*
		 * In order: asked again, the page would come after the held
		 * answer anyway; the toucher waits for that one, asking nothing
		 * (time for its fault to come: the check holds either way).
		 */
		if (how == SERIAL) {
			usleep(50 * 1000);
			break;
		}
		for (int i = 0; i < 500 && !__atomic_load_n(&tc.finished, __ATOMIC_ACQUIRE); i++)
			usleep(10 * 1000);
		assert_true(__atomic_load_n(&tc.finished, __ATOMIC_ACQUIRE));
		break;
	case FORK:
		/*
		 * Sharing the fd table: a fork's copy of it would hold the uffd, so if
		 * the engine had already ended, its close would not end the FORK
		 * event's wait and the fork would wait for ever.
		 */
		child = (pid_t)syscall(SYS_clone, CLONE_FILES | SIGCHLD, NULL, NULL, NULL, 0);
		assert_true(child >= 0);
		if (!child) /* the engine in the parent serves the child's uffd */
			_exit(bad_word(area, AREA, m->vaddr, false) ? 1 : 0);
		break;
	case MREMAP:
		moved = mmap(NULL, row->len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		assert_true(moved != MAP_FAILED);
		assert_true(mremap(claim + row->off, row->len, row->len, MREMAP_MAYMOVE | MREMAP_FIXED, moved) ==
			    moved);
		break;
	case DONTNEED:
		assert_int_equal(madvise(claim + row->off, row->len, MADV_DONTNEED), 0);
		break;
	case MUNMAP:
		assert_int_equal(munmap(claim + row->off, row->len), 0);
		break;
	}
	release(m);
	if (async && row->act == TOUCH) {
		assert_int_equal(pthread_join(touch_th, NULL), 0);
		assert_int_equal(tc.bad, 0);
		pthread_mutex_lock(&m->lock);
		unsigned again = as.watch_hits;
		pthread_mutex_unlock(&m->lock);
		if (again != (how == SERIAL ? 0U : 1U)) {
			print_message("the touched page in flight was asked for %u more time(s):", again);
			for (unsigned i = 0; i < again && i < 4; i++)
				print_message(" %s 0x%llx+%llu pages", as.seen[i].urgent ? "urgent" : "background",
					      (unsigned long long)as.seen[i].vaddr, (unsigned long long)as.seen[i].nr);
			print_message("\n");
		}
		/*
		 * Asked again once, urgently, that page alone.  Then, in a few runs
		 * in a hundred under load: once more, in the background, from that
		 * page on.  The held answer's UFFDIO_COPY met EAGAIN at the page the
		 * urgent answer was installing at that moment (traced), and, as on
		 * any EAGAIN, the install stopped there and put the rest back for
		 * later (remote.c): a wasted request, not wrong memory.
		 */
		if (how == SERIAL) {
			assert_int_equal(again, 0);
		} else {
			assert_true(again >= 1 && again <= 2);
			assert_true(as.seen[0].urgent);
			assert_int_equal(as.seen[0].vaddr, tc.dump_addr);
			assert_int_equal(as.seen[0].nr, 1);
			if (again == 2) {
				assert_false(as.seen[1].urgent);
				assert_int_equal(as.seen[1].vaddr, tc.dump_addr);
			}
		}
	}
	/* an engine that has ended (and closed the read end) needs no word: EPIPE */
	ssize_t w = write(over[1], "x", 1);
	assert_true(w == 1 || (w < 0 && errno == EPIPE));
	if (child > 0) {
		int st;
		assert_int_equal(waitpid(child, &st, 0), child);
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), 0);
	}
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(r.ret, 0);
	if (async)
		async_stop(&as);
	if (ws) { /* every page of it handed out or found gone, and the last run over */
		print_message("    working set: %llu pages taken, %llu between them, %llu not pending, in %.3f ms\n",
			      (unsigned long long)r.stats.ws_pages, (unsigned long long)r.stats.ws_gap_pages,
			      (unsigned long long)r.stats.ws_skipped, r.stats.ws_ms);
		assert_true(r.stats.ws_pages > 0);
		assert_int_equal(r.stats.ws_pages + r.stats.ws_skipped, WS_NR);
		assert_true(r.stats.ws_ms > 0);
	}
	close(over[1]);

	/* every byte: data where the pages stayed, zero where they were dropped */
	uint64_t hole_s = m->hit_vaddr + row->off, hole_e = hole_s + row->len;
	if (row->act != DONTNEED && row->act != MREMAP && row->act != MUNMAP)
		hole_s = hole_e = 0;
	for (uint64_t a = m->vaddr; a < m->vaddr + AREA; a += PG) {
		bool in_hole = a >= hole_s && a < hole_e;
		if (in_hole && row->act != DONTNEED)
			continue; /* not mapped there any more */
		uint64_t bad = bad_word(area + (a - m->vaddr), PG, a, in_hole);
		if (bad)
			print_message("wrong word at 0x%llx (%s)\n", (unsigned long long)bad,
				      in_hole ? "want zero" : "want data");
		assert_int_equal(bad, 0);
	}
	if (moved) /* the moved pages keep their dump-time data */
		assert_int_equal(bad_word(moved, row->len, hole_s, false), 0);
	if (moved)
		munmap(moved, row->len);
	if (row->act == MREMAP || row->act == MUNMAP) {
		/* not the hole: something else (an allocator's chunk) may be mapped there by now */
		munmap(area, hole_s - m->vaddr);
		munmap(area + (hole_e - m->vaddr), AREA - (hole_e - m->vaddr));
	} else {
		munmap(area, AREA);
	}
	source_fini(m);
}

/* The engine paces a source that answers in order (remote.c: serial); every row's words, and no page asked twice. */
static void test_rows_serial(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		run_row(&rows[i], SERIAL, false);
}

static void test_rows_copying(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		run_row(&rows[i], COPIES, false);
}

static void test_rows_mapping(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		run_row(&rows[i], MAPS, false);
}

static void test_rows_following(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		run_row(&rows[i], FOLLOWING, false);
}

/*
 * The held claim (or background request) is a run of the working set; the
 * rest of it is copied before any chunk.  Asynchronous, the touch row is left
 * out: it asserts how the touched page of a held 2 MiB request is asked again,
 * and a run of the working set does not reach that page.
 */
static void test_rows_working_set(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		run_row(&rows[i], COPIES, true);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		if (rows[i].act != TOUCH)
			run_row(&rows[i], ASYNC, true);
}

static void test_rows_async(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		run_row(&rows[i], ASYNC, false);
}

/* An engine over m serving this process's uffd in thread th, the restore finished. */
static void start_engine(struct run *r, struct mem_source *m, int uffd, struct image *im,
			 const struct lr_engine_opts *o, pthread_t *th)
{
	if (!r->e) /* else made by the caller, to set it up first */
		r->e = lr_engine_create(&m->base, o);
	assert_non_null(r->e);
	m->engine = r->e;
	assert_int_equal(lr_engine_add_task(r->e, 1, getpid(), uffd, &im->mm), 0);
	assert_int_equal(pthread_create(th, NULL, run_engine, r), 0);
	lr_engine_restore_finished(r->e);
}

/*
 * A MADV_HUGEPAGE mapping served by the engine: every byte right, and each of
 * its 2 MiB extents collapsed by the sweep once all is resident, while this
 * thread keeps touching the mapping (its faults are served meanwhile).
 */
static void test_huge_pages(void **state)
{
	struct mem_source m = {.base = {.ops = &mem_ops, .copies = true}};
	struct run r = {0};
	pthread_t th;

	(void)state;
	if (lr_thp_mode() < LR_THP_MADVISE) {
		print_message("transparent huge pages are off or unknown here: skipped\n");
		skip();
	}
	int uffd = new_uffd();
	if (uffd < 0) {
		print_message("no userfaultfd here (%s): skipped\n", strerror(errno));
		skip();
	}
	uint8_t *raw = mmap(NULL, AREA + CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(raw != MAP_FAILED);
	uint8_t *area = (uint8_t *)(((uintptr_t)raw + CHUNK - 1) & ~(CHUNK - 1));
	long before = lr_anon_huge_kib(getpid());
	assert_int_equal(madvise(area, AREA, MADV_HUGEPAGE), 0);
	struct uffdio_register reg = {.range = {.start = (uintptr_t)area, .len = AREA},
				      .mode = UFFDIO_REGISTER_MODE_MISSING};
	assert_int_equal(ioctl(uffd, UFFDIO_REGISTER, &reg), 0);
	source_init(&m, area, true);
	struct image im;
	image_init(&im, m.vaddr, 1ULL << MADV_HUGEPAGE);
	struct lr_engine_opts o = {.workers = 1};
	start_engine(&r, &m, uffd, &im, &o, &th);
	for (int pass = 0; pass < 4; pass++) /* faults, then reads of installed and collapsing extents */
		assert_int_equal(bad_word(area, AREA, m.vaddr, false), 0);
	pthread_join(th, NULL);
	assert_int_equal(r.ret, 0);
	assert_int_equal(bad_word(area, AREA, m.vaddr, false), 0);
	long after = lr_anon_huge_kib(getpid());
	print_message("  %llu of %llu extents collapsed (%llu refused), AnonHugePages %ld -> %ld kB\n",
		      (unsigned long long)r.stats.thp_collapsed, (unsigned long long)r.stats.thp_extents,
		      (unsigned long long)r.stats.thp_failed, before, after);
	assert_int_equal(r.stats.thp_extents, AREA / CHUNK);
	assert_int_equal(r.stats.thp_collapsed, AREA / CHUNK);
	assert_true(after - before >= (long)(AREA >> 10));
	munmap(raw, AREA + CHUNK);
	source_fini(&m);
}

/*
 * Workers that wait for a calm spell (--workers-beside-faults no): while this
 * thread reads every word, faulting all the way, the worker must neither hold
 * the end up (parked when the fault thread finishes) nor be left parked once
 * the faults stop; every word right either way.  The working set's runs wait
 * for calm spells too there (lr_claim_take()): each of its pages is still
 * installed or found taken, and its end is still reached.
 */
static void test_calm_workers(void **state)
{
	struct mem_source m = {.base = {.ops = &mem_ops, .copies = true}};
	struct run r = {0};
	pthread_t th;

	(void)state;
	int uffd;
	uint8_t *area = registered_area(&uffd);
	source_init(&m, area, true);
	struct image im;
	image_init(&im, m.vaddr, 0);
	struct lr_engine_opts o = {.workers = 1, .workers_calm = true, .workers_why = "test"};
	r.e = lr_engine_create(&m.base, &o);
	assert_non_null(r.e);
	use_working_set(r.e, m.vaddr);
	start_engine(&r, &m, uffd, &im, &o, &th);
	/* scattered first reads (a prime stride): faults keep coming while the prefetch runs */
	for (uint64_t k = 0, n = AREA / PG; k < n; k++)
		(void)*(volatile uint8_t *)(area + (k * 7919 % n) * PG);
	pthread_join(th, NULL);
	assert_int_equal(r.ret, 0);
	assert_int_equal(bad_word(area, AREA, m.vaddr, false), 0);
	assert_true(r.stats.workers_calm);
	print_message(
	    "  %llu faults, %llu pages prefetched, working set: %llu pages by its runs, %llu by other copies\n",
	    (unsigned long long)r.stats.faults, (unsigned long long)r.stats.prefetch_pages,
	    (unsigned long long)r.stats.ws_pages, (unsigned long long)r.stats.ws_skipped);
	assert_int_equal(r.stats.ws_pages + r.stats.ws_skipped, WS_NR);
	assert_true(r.stats.ws_ms > 0);
	munmap(area, AREA);
	source_fini(&m);
}

/* The last CPU we may run on, or -1 with fewer than two. */
static int last_cpu(void)
{
	cpu_set_t set;
	int last = -1;

	if (sched_getaffinity(0, sizeof(set), &set) || CPU_COUNT(&set) < 2)
		return -1;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			last = c;
	return last;
}

struct pinned_reader {
	uint8_t *area;
	int cpu;
	bool pinned;
};

/* Scattered first reads of every page (a prime stride), pinned to one CPU. */
static void *pinned_reads(void *arg)
{
	struct pinned_reader *pr = arg;
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(pr->cpu, &one);
	pr->pinned = !sched_setaffinity(0, sizeof(one), &one);
	for (uint64_t k = 0, n = AREA / PG; k < n; k++)
		(void)*(volatile uint8_t *)(pr->area + (k * 7919 % n) * PG);
	return NULL;
}

/*
 * opts.follow (follow.c): the fault thread moves to the CPU of the thread
 * whose faults it serves (here one pinned to our last CPU; the uffd has no
 * thread ids, so the task's main thread is looked at: the faulting thread
 * is found through its task, this process), and every word is right.
 */
static void test_follow(void **state)
{
	struct mem_source m = {.base = {.ops = &mem_ops, .copies = true}};
	struct run r = {0};
	pthread_t th;

	(void)state;
	int cpu = last_cpu();
	if (cpu < 0) {
		print_message("fewer than two CPUs to run on: nothing to follow, skipped\n");
		skip();
	}
	int uffd;
	uint8_t *area = registered_area(&uffd);
	source_init(&m, area, true);
	struct image im;
	image_init(&im, m.vaddr, 0);
	struct lr_engine_opts o = {.workers = 2, .follow = true, .follow_why = "test"};
	start_engine(&r, &m, uffd, &im, &o, &th); /* before the pin: its threads would inherit it */
	/* the main thread reads: the task's stat file is its */
	cpu_set_t all;
	assert_int_equal(sched_getaffinity(0, sizeof(all), &all), 0);
	struct pinned_reader pr = {.area = area, .cpu = cpu};
	pinned_reads(&pr);
	assert_int_equal(sched_setaffinity(0, sizeof(all), &all), 0);
	pthread_join(th, NULL);
	assert_int_equal(r.ret, 0);
	assert_int_equal(bad_word(area, AREA, m.vaddr, false), 0);
	print_message("  %llu faults, %llu pages prefetched, fault thread moved %llu time(s), last to CPU %d (the "
		      "reader's: %d)\n",
		      (unsigned long long)r.stats.faults, (unsigned long long)r.stats.prefetch_pages,
		      (unsigned long long)r.stats.fault_thread_moves, r.stats.fault_thread_cpu, cpu);
	assert_true(r.stats.follow);
	assert_true(pr.pinned);
	if (r.stats.faults) { /* the prefetch may win every page first: then there was nothing to follow */
		assert_true(r.stats.fault_thread_moves >= 1);
		assert_int_equal(r.stats.fault_thread_cpu, cpu);
	}
	munmap(area, AREA);
	source_fini(&m);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN); /* see the write to `over` */
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rows_async),	     /* first: it does not wait for the rows before it */
	    cmocka_unit_test(test_rows_serial),	     /* a source answering in request order */
	    cmocka_unit_test(test_rows_copying),     /* a source copying into buffers */
	    cmocka_unit_test(test_rows_mapping),     /* a source mapping its data */
	    cmocka_unit_test(test_huge_pages),	     /* MADV_HUGEPAGE: the sweep's collapses */
	    cmocka_unit_test(test_calm_workers),     /* workers that wait for a calm spell */
	    cmocka_unit_test(test_rows_following),   /* the fault thread on the faulting thread's CPU */
	    cmocka_unit_test(test_rows_working_set), /* a working set's runs are the claims */
	    cmocka_unit_test(test_follow),	     /* it moves there */
	};
	lr_log_set_level(LR_LOG_WARN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

// SPDX-License-Identifier: MIT
/*
 * The engine over an asynchronous page source (source.h's submit(): a page
 * server).  A fault sends an urgent request and the fault thread goes back to
 * its epoll, so one task's round trip holds up no other task; background
 * requests keep a window in flight near the latest fault, small right after
 * a fault and growing while none comes (as stock criu's background steps,
 * criu/uffd.c), so that a fault's answer queues behind little.  An urgent
 * answer is read and installed by the fault thread itself (the source's poll
 * fd is in its epoll: no hop to another thread on our side), a background
 * one by the source's thread; either installs through the task's copy gate,
 * with the rules of a prefetch claim (plugin/README.md, "Rules the engine
 * keeps"): a request's range is out of pending while in flight; an event
 * over it cancels it, inside the gate's read side, after putting what is not
 * installed back into pending for the event to see; a fork gives the child
 * what is in flight; a range leaves the books only once installed.  A fault
 * on a page in flight in an urgent request sends nothing: the UFFDIO_COPY
 * that lands wakes it.  In a background one, that page is asked again,
 * urgently (a duplicate: its range stays the background request's, the
 * copy landing second gets EEXIST, and both carry the same dump page), so a
 * fault never waits behind the bulk stream.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "plugin/engine/internal.h"
#include "plugin/log/log.h"

#define REQ_MAX	     (256UL << 10) /* bytes per background request */
#define URGENT_MAX   (64UL << 10)  /* the faulting page's part of its fault-around window */
#define BULK_WAIT_MS 1		   /* a fault on the next bulk answer waits this long for it, then asks again */
#define WINDOW_MIN   2U		   /* background requests in flight after a fault, at least */
#define WINDOW_MAX   16U	   /* ... growing by one per background answer while none comes */
#define WINDOW_CAP   64U	   /* ... or to BDP_GAIN products of a longer path, at most (16 MiB) */
#define BDP_GAIN     2.0	   /* after a fault, at least this many bandwidth-delay products */
#define RATE_SAMPLES 10U	   /* the delivery rate: the largest of this many recent intervals */
#define POOL_MAX     64U	   /* REQ_MAX buffers kept for reuse */
/* one in-order connection (no urgent one): the background bytes a fault may find ahead of it */
#define SERIAL_DELAY 200e-6	   /* s: what drains in this long, or in the shortest round trip if longer */
#define SERIAL_MIN   (128UL << 10) /* ... at least (and while the drain rate is not known yet) */
#define SERIAL_MAX   (WINDOW_MAX * REQ_MAX)
#define SERIAL_FAULT (16UL << 10) /* ... after a fault: one request, doubling per answer asked since */
#define DRAIN_DECAY  0.875	  /* the drain rate's weight of the past, per answer */
#define COPY_PIECE   (64UL << 10) /* a fault thread waiting at the gate waits for one of these */

struct lr_rreq {
	struct page_source_req r; /* r.arg is this */
	struct lr_remote *rm;
	struct lr_task *t;
	uint64_t start, end, img; /* run-time range and its dump-time address */
	uint64_t done;		  /* bytes from start installed: its copier, inside the gate */
	bool urgent;
	bool dup;	/* a page of a background request in flight, asked again for a fault: its range is that one's */
	bool ws;	/* a run of the working set (ws.c): lr_ws_run_over() when it ends */
	bool cancelled; /* atomic store under e->lock, by the fault thread inside t's gate read side */
	unsigned faults; /* fault messages waiting for it; under e->lock */
	double t0;	 /* when the first of them was read */
	uint64_t waiter; /* the first one's page, while it waits for the bulk answer (not asked again yet); 0: none */
	double sent;
	struct lr_rreq *next, *prev;
};

struct lr_remote {
	struct lr_engine *e;
	/* held by a completion while it uses e; lr_remote_detach() takes it once the engine stops */
	pthread_mutex_t alive;
	bool detached;		  /* under alive */
	unsigned outstanding;	  /* submitted, not completed: atomic */
	struct lr_rreq *inflight; /* under e->lock, as the rest */
	unsigned background;
	unsigned window; /* background requests to keep in flight: as stock criu's steps, small after a fault */
	/* the path, for how small: its shortest urgent round trip and background delivery rate */
	double min_rtt;		   /* s, 0 before the first */
	double rate_t0;		   /* the current interval's start, 0 before */
	uint64_t rate_bytes;	   /* background bytes received in it */
	double rate[RATE_SAMPLES]; /* bytes/s of the last intervals */
	unsigned rate_i;
	/*
	 * No urgent connection (a server of one connection, criu dump; or ours
	 * before or between its urgent ones): answers come in request order, a
	 * fault's behind every byte asked before it.  Background bytes in
	 * flight are then held to what drains in SERIAL_DELAY (the drain rate
	 * measured over answers that came back to back), to one small request
	 * after a fault, doubling while none comes (as stock criu's steps), and
	 * to none while an urgent answer is due; a fault on a page in flight
	 * waits for it (asked again, it would only queue behind it).
	 */
	uint64_t slimit;		/* serial: background bytes in flight, in requests of half of it */
	double last_fault;		/* when the latest fault asked for pages */
	unsigned urgent;		/* urgent requests in flight */
	uint64_t bg_bytes;		/* background bytes in flight */
	double last_done;		/* when the latest answer was installed */
	double drain_bytes, drain_time; /* decaying sums over answers that came back to back */
	void *pool[POOL_MAX];
	unsigned nr_pool;
	unsigned poll_gen; /* fault thread: the source's poll fd in the epoll, and its generation */
	bool polling;
};

/* The epoll tag of the source's poll fd: the address is what matters. */
static const char remote_tag;

/* ---- requests: under e->lock ---------------------------------------------- */

static void *buf_get(struct lr_remote *rm, uint64_t len)
{
	if (len <= REQ_MAX && rm->nr_pool)
		return rm->pool[--rm->nr_pool];
	return aligned_alloc(PAGE, len <= REQ_MAX ? REQ_MAX : len);
}

static void buf_put(struct lr_remote *rm, void *buf, uint64_t len)
{
	if (len <= REQ_MAX && rm->nr_pool < POOL_MAX)
		rm->pool[rm->nr_pool++] = buf;
	else
		free(buf);
}

static void unlink_req(struct lr_remote *rm, struct lr_rreq *q)
{
	if (q->prev)
		q->prev->next = q->next;
	else
		rm->inflight = q->next;
	if (q->next)
		q->next->prev = q->prev;
	if (q->urgent) {
		rm->urgent--;
	} else {
		rm->background--;
		rm->bg_bytes -= q->end - q->start;
	}
}

static void on_done(struct page_source_req *r);

/* Lock held: what a completion tells of the path (an urgent answer its round trip, background ones its rate). */
static void path_sample(struct lr_remote *rm, const struct lr_rreq *q, double now)
{
	double el, last = rm->last_done;

	if (q->r.status)
		return;
	rm->last_done = now;
	/*
	 * Sent before the previous answer came: the connection was busy with it
	 * since.  Background answers only: a fault's page alone is mostly the
	 * cost of a request, and would make the rate that of small requests.
	 */
	if (!q->urgent && last && q->sent <= last) {
		rm->drain_bytes = rm->drain_bytes * DRAIN_DECAY + (double)(q->end - q->start);
		rm->drain_time = rm->drain_time * DRAIN_DECAY + (now - last);
	}
	if (q->urgent) {
		if (!rm->min_rtt || now - q->sent < rm->min_rtt)
			rm->min_rtt = now - q->sent;
		return;
	}
	if (!rm->rate_t0)
		rm->rate_t0 = q->sent;
	rm->rate_bytes += q->end - q->start;
	el = now - rm->rate_t0;
	if (el < 0.005 || el < 2 * rm->min_rtt)
		return;
	rm->rate[rm->rate_i++ % RATE_SAMPLES] = rm->rate_bytes / el;
	rm->rate_bytes = 0;
	rm->rate_t0 = now;
}

/*
 * Lock held: the requests that keep the path full, BDP_GAIN of its rate x
 * round trip (the round trip learnt from urgent answers: 1 before the first).
 */
static unsigned bdp_window(const struct lr_remote *rm)
{
	double rate = 0, w;

	for (unsigned i = 0; i < RATE_SAMPLES; i++)
		if (rm->rate[i] > rate)
			rate = rm->rate[i];
	w = BDP_GAIN * rate * rm->min_rtt / REQ_MAX + 1;
	return w >= WINDOW_CAP ? WINDOW_CAP : (unsigned)w;
}

/*
 * Lock held: a window of at least floor requests and what keeps the path
 * full.  Right after a fault the floor is WINDOW_MIN: small, so that what is
 * sent from then on queues behind little, but not below the path's need (the
 * stream would slow to the window's pace while faults keep coming, and a
 * fault's answer gains nothing from it: it has a connection of its own, or
 * queues behind what is already sent).  While no fault comes, WINDOW_MAX.
 */
static unsigned path_window(const struct lr_remote *rm, unsigned floor)
{
	unsigned w = bdp_window(rm);

	return w < floor ? floor : w;
}

/*
 * Lock held: whether answers come in request order now (a source with an
 * urgent channel that has none at the moment, source.h).  Asked at every
 * pump: the urgent connection comes after the first answer and may be lost
 * and made again.  A source without one answers in any order.
 */
static bool serial_now(struct lr_engine *e)
{
	const struct page_source_ops *ops = e->src->ops;
	unsigned gen;

	return ops->poll_fd && ops->poll_fd(e->src, &gen) < 0;
}

/* Lock held: serial, the background bytes a fault may find ahead of it. */
static uint64_t serial_cap(const struct lr_remote *rm)
{
	double delay = rm->min_rtt > SERIAL_DELAY ? rm->min_rtt : SERIAL_DELAY, cap;

	if (!rm->drain_time)
		return SERIAL_MIN;
	cap = rm->drain_bytes / rm->drain_time * delay;
	if (cap < SERIAL_MIN)
		return SERIAL_MIN;
	return cap > SERIAL_MAX ? SERIAL_MAX : (uint64_t)cap & ~(uint64_t)(PAGE - 1);
}

/* [start, end) of t, out of pending already, asked for; -1 (the engine failed) if it can't be. */
static int submit(struct lr_remote *rm, struct lr_task *t, uint64_t start, uint64_t end, uint64_t img, bool urgent,
		  double t0, bool dup, bool ws)
{
	struct lr_engine *e = rm->e;
	struct lr_rreq *q = calloc(1, sizeof(*q));
	char err[512], msg[700];

	if (q)
		q->r.buf = buf_get(rm, end - start);
	if (!q || !q->r.buf) {
		free(q);
		lr_engine_fail_locked(e, "out of memory for page requests");
		return -1;
	}
	*q = (struct lr_rreq){.r = {.pid = t->src_pid,
				    .vaddr = img,
				    .nr_pages = (end - start) / PAGE,
				    .buf = q->r.buf,
				    .urgent = urgent,
				    .done = on_done,
				    .arg = q},
			      .rm = rm,
			      .t = t,
			      .start = start,
			      .end = end,
			      .img = img,
			      .urgent = urgent,
			      .dup = dup,
			      .ws = ws,
			      .faults = urgent,
			      .t0 = t0,
			      .sent = lr_now(),
			      .next = rm->inflight};
	if (rm->inflight)
		rm->inflight->prev = q;
	rm->inflight = q;
	if (urgent) {
		rm->urgent++;
	} else {
		rm->background++;
		rm->bg_bytes += end - start;
	}
	__atomic_add_fetch(&rm->outstanding, 1, __ATOMIC_SEQ_CST);
	if (e->src->ops->submit(e->src, &q->r, err, sizeof(err)) == 0)
		return 0;
	__atomic_sub_fetch(&rm->outstanding, 1, __ATOMIC_SEQ_CST);
	unlink_req(rm, q);
	if (ws)
		lr_ws_run_over(e);
	buf_put(rm, q->r.buf, end - start);
	free(q);
	/* back into pending, so that nothing is taken for installed (a duplicate's range is another's) */
	if (!dup && lr_ranges_add(&t->pending, start, end, img))
		pr_err("task %u: the ranges can't take 0x%llx back", t->src_pid, (unsigned long long)start);
	snprintf(msg, sizeof(msg), "task %u (pid %d): page 0x%llx: %s", t->src_pid, t->real_pid,
		 (unsigned long long)start, err);
	lr_engine_fail_locked(e, msg);
	return -1;
}

/*
 * [start, end) in background requests of at most REQ_MAX; a run of the
 * working set (ws) is no longer than one (WS_RUN_MAX).
 */
static int submit_background(struct lr_remote *rm, struct lr_task *t, uint64_t start, uint64_t end, uint64_t img,
			     bool ws)
{
	for (uint64_t s = start; s < end; s += REQ_MAX) {
		uint64_t e = end - s > REQ_MAX ? s + REQ_MAX : end;

		if (submit(rm, t, s, e, img + (s - start), false, 0, false, ws && s == start)) {
			/* what was not submitted goes back (the engine has failed anyway) */
			if (e < end)
				lr_ranges_add(&t->pending, e, end, img + (e - start));
			return -1;
		}
	}
	return 0;
}

/*
 * Lock held: a claim (lr_claim_take) of len bytes at most; the rest goes back
 * into pending, to be taken next.
 */
static bool take(struct lr_engine *e, uint64_t len, struct lr_claim *c)
{
	if (!lr_claim_take(e, c))
		return false;
	if (c->end - c->start <= len)
		return true;
	if (lr_ranges_add(&c->t->pending, c->start + len, c->end, c->img + len)) {
		lr_engine_fail_locked(e, "out of memory in the page requests");
		return false;
	}
	c->end = c->start + len;
	if (!c->ws)
		e->hint_addr = c->end;
	return true;
}

/*
 * Lock held: background requests up to the window, near the latest fault.
 * Serial: none while an urgent answer is due, else up to slimit bytes (within
 * the cap) in requests of half of it, two in flight keeping the server busy.
 */
static void pump_locked(struct lr_engine *e)
{
	struct lr_remote *rm = e->remote;
	int st = lr_stage(e);
	bool serial = serial_now(e);

	while (st >= STAGE_FINISHED && st < STAGE_STOPPING) {
		struct lr_claim c = {0};
		uint64_t len = PREFETCH_CHUNK;

		if (serial) {
			uint64_t cap = serial_cap(rm), lim = rm->slimit < cap ? rm->slimit : cap;

			len = lim / 2 < SERIAL_FAULT ? SERIAL_FAULT : lim / 2 & ~(uint64_t)(PAGE - 1);
			if (len > REQ_MAX)
				len = REQ_MAX;
			if (rm->urgent || (rm->bg_bytes && rm->bg_bytes + len > lim))
				break;
		} else if (rm->background >= rm->window) {
			break;
		}
		if (!take(e, len, &c) || submit_background(rm, c.t, c.start, c.end, c.img, c.ws))
			break;
		st = lr_stage(e);
	}
}

bool lr_remote_pump(struct lr_engine *e)
{
	pthread_mutex_lock(&e->lock);
	pump_locked(e);
	pthread_mutex_unlock(&e->lock);
	return false; /* the fault thread may sleep: completions pump from here on */
}

/* ---- completion: the source's thread -------------------------------------- */

/* Inside t's gate, in pieces, leaving it between them when the fault thread waits. */
static int install(struct lr_engine *e, struct lr_rreq *q, uint64_t *installed)
{
	struct lr_task *t = q->t;
	uint64_t len = q->end - q->start, sub = 0;
	int r = INSTALL_OK;

	*installed = 0;
	lr_gate_copy_enter(&t->gate);
	while (sub < len && r == INSTALL_OK) {
		uint64_t l = len - sub < COPY_PIECE ? len - sub : COPY_PIECE, done = 0, got = 0;

		if (sub && lr_gate_reader_waits(&t->gate)) {
			lr_gate_copy_exit(&t->gate);
			lr_gate_copy_enter(&t->gate);
		}
		if (__atomic_load_n(&q->cancelled, __ATOMIC_ACQUIRE) || lr_stage(e) >= STAGE_STOPPING)
			break;
		r = lr_copy(e, t, q->start + sub, (const uint8_t *)q->r.buf + sub, l, &done, &got, NULL);
		sub += done;
		*installed += got;
		__atomic_store_n(&q->done, sub, __ATOMIC_RELEASE);
	}
	lr_gate_copy_exit(&t->gate);
	return r;
}

static void complete(struct lr_remote *rm, struct lr_rreq *q)
{
	struct lr_engine *e = rm->e;
	struct lr_task *t = q->t;
	uint64_t installed = 0, len = q->end - q->start;
	int r = INSTALL_OK;
	bool wake;
	char msg[700];

	if (q->r.status == 0 && lr_stage(e) < STAGE_STOPPING)
		r = install(e, q, &installed);
	pthread_mutex_lock(&e->lock);
	unlink_req(rm, q);
	if (q->ws)
		lr_ws_run_over(e);
	path_sample(rm, q, lr_now());
	bool cancelled = q->cancelled;
	uint64_t done = q->done;
	if (q->r.status && !cancelled && !t->gone) {
		snprintf(msg, sizeof(msg), "task %u (pid %d): page 0x%llx: %s", t->src_pid, t->real_pid,
			 (unsigned long long)q->start, q->r.err);
		lr_engine_fail_locked(e, msg);
	} else if (r == INSTALL_GONE) {
		lr_task_gone(e, t);
	} else if (!cancelled && !q->dup && !t->gone && done < len && r != INSTALL_FATAL &&
		   lr_ranges_add(&t->pending, q->start + done, q->end, q->img + done)) {
		lr_engine_fail_locked(e, "out of memory in the page requests");
	}
	/* a faulting thread whose page did not land faults again (and is served afresh) */
	wake = q->faults && done < len && !t->gone;
	if (!q->urgent) {
		__atomic_fetch_add(&e->stats.prefetch_pages, installed / PAGE, __ATOMIC_RELAXED);
		if (rm->window < path_window(rm, WINDOW_MAX))
			rm->window++;
		/* no fault since it was asked: larger requests (pump_locked clips them to the cap) */
		if (q->sent > rm->last_fault && rm->slimit < SERIAL_MAX)
			rm->slimit *= 2;
	}
	pthread_mutex_unlock(&e->lock);
	for (unsigned i = 0; i < q->faults && done == len; i++)
		lr_account_fault(e, i == 0 && q->urgent ? installed : 0, q->t0);
	if (wake)
		lr_wake(t, q->start + done, len - done);
	pthread_mutex_lock(&e->lock);
	buf_put(rm, q->r.buf, len);
	pump_locked(e);
	bool idle = !rm->inflight;
	pthread_mutex_unlock(&e->lock);
	if (idle || lr_stage(e) >= STAGE_STOPPING)
		lr_engine_kick(e); /* the fault thread looks whether all is resident */
	/*
	 * A streaming thread keeps its CPU for a scheduler slice: a restored
	 * thread woken there by a fault's answer waited for it while the other
	 * CPU idled (traced on loopback: bench/net/README.md).  After each
	 * background answer the CPU goes to whoever waits for it; with nobody,
	 * this costs a system call.
	 */
	if (!q->urgent)
		sched_yield();
}

static void on_done(struct page_source_req *r)
{
	struct lr_rreq *q = r->arg;
	struct lr_remote *rm = q->rm;
	bool detached, last;

	pthread_mutex_lock(&rm->alive);
	detached = rm->detached;
	if (!detached)
		complete(rm, q);
	else
		free(q->r.buf);
	free(q);
	last = __atomic_sub_fetch(&rm->outstanding, 1, __ATOMIC_SEQ_CST) == 0;
	pthread_mutex_unlock(&rm->alive);
	if (detached && last) {
		pthread_mutex_destroy(&rm->alive);
		free(rm);
	}
}

/* ---- the fault thread ----------------------------------------------------- */

/* Lock held: whether no background request was sent before q: its answer comes next on the bulk stream. */
static bool next_on_bulk(const struct lr_rreq *q)
{
	for (const struct lr_rreq *o = q->next; o; o = o->next)
		if (!o->urgent && !o->cancelled)
			return false;
	return true;
}

static struct lr_rreq *find_inflight(struct lr_remote *rm, struct lr_task *t, uint64_t addr)
{
	for (struct lr_rreq *q = rm->inflight; q; q = q->next)
		if (q->t == t && !q->cancelled && addr >= q->start && addr < q->end)
			return q;
	return NULL;
}

/*
 * After an urgent submit: the source's poll fd (its urgent connection) in
 * the epoll, so that the answer is read here; a new fd (a connection made
 * again) is added anew, the old one having left the epoll when closed.
 */
static void watch(struct lr_engine *e)
{
	struct lr_remote *rm = e->remote;
	const struct page_source_ops *ops = e->src->ops;
	unsigned gen = 0;
	int fd = ops->poll_fd ? ops->poll_fd(e->src, &gen) : -1;
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = (void *)&remote_tag};

	if (fd < 0 || (rm->polling && gen == rm->poll_gen))
		return;
	if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, fd, &ev) &&
	    (errno != EEXIST || epoll_ctl(e->epfd, EPOLL_CTL_MOD, fd, &ev))) {
		pr_perror("can't watch the page server's urgent connection");
		return; /* its answers wait for the next urgent request's watch */
	}
	rm->polling = true;
	rm->poll_gen = gen;
}

bool lr_remote_event(struct lr_engine *e, const void *tag)
{
	if (tag != &remote_tag)
		return false;
	if (e->remote && e->src->ops->poll)
		e->src->ops->poll(e->src);
	return true;
}

/* Lock held: the page at addr of background request q asked for again, urgently, alone. */
static int ask_again(struct lr_remote *rm, struct lr_rreq *q, uint64_t addr, double t0)
{
	uint64_t page = addr & ~(uint64_t)(PAGE - 1);

	return submit(rm, q->t, page, page + PAGE, q->img + (page - q->start), true, t0, true, false) ? INSTALL_FATAL
												      : INSTALL_OK;
}

int lr_remote_overdue(struct lr_engine *e)
{
	struct lr_remote *rm = e->remote;
	double now = lr_now(), next = -1;
	bool asked = false, failed = false;

	if (!rm)
		return -1;
	pthread_mutex_lock(&e->lock);
	for (struct lr_rreq *q = rm->inflight; q && !failed; q = q->next) {
		if (!q->waiter || q->cancelled)
			continue;
		double left = q->t0 + BULK_WAIT_MS / 1e3 - now;
		if (left > 0) {
			next = next < 0 || left < next ? left : next;
			continue;
		}
		/* the faulting thread is served by the urgent answer: the bulk one does not count it again */
		uint64_t page = q->waiter & ~(uint64_t)1;
		q->waiter = 0;
		q->faults--;
		failed = ask_again(rm, q, page, q->t0) != INSTALL_OK;
		asked = true;
	}
	pthread_mutex_unlock(&e->lock);
	if (asked && !failed)
		watch(e);
	return next < 0 ? -1 : (int)(next * 1e3) + 1;
}

int lr_remote_fault(struct lr_engine *e, struct lr_task *t, uint64_t addr, double t0)
{
	struct lr_remote *rm = e->remote;
	int ret = INSTALL_OK;

	pthread_mutex_lock(&e->lock);
	if (t->gone) {
		pthread_mutex_unlock(&e->lock);
		return INSTALL_OK;
	}
	e->hint_task = t;
	e->hint_addr = addr;
	rm->window = path_window(rm, WINDOW_MIN); /* what is sent from now on queues behind less */
	const struct lr_range *rp = lr_ranges_get(&t->pending, addr);
	if (rp) {
		struct lr_range rg = *rp;
		lr_adapt_window(t, addr);
		uint64_t end = addr + (uint64_t)t->window * PAGE, img = rg.img + (addr - rg.start);
		lr_ws_note(e, t, img);
		if (end > rg.end)
			end = rg.end;
		uint64_t urgent_end = end - addr > URGENT_MAX ? addr + URGENT_MAX : end;
		t->next_fault = end;
		/* serial: what is asked from now on is what the next fault queues behind */
		rm->slimit = SERIAL_FAULT;
		rm->last_fault = lr_now();
		if (lr_ranges_drop(&t->pending, addr, end)) {
			lr_engine_fail_locked(e, "out of memory in the fault path");
			ret = INSTALL_FATAL;
		} else if (submit(rm, t, addr, urgent_end, img, true, t0, false, false) ||
			   (urgent_end < end &&
			    submit_background(rm, t, urgent_end, end, img + (urgent_end - addr), false))) {
			ret = INSTALL_FATAL;
		}
		pthread_mutex_unlock(&e->lock);
		if (ret == INSTALL_OK)
			watch(e);
		return ret;
	}
	struct lr_rreq *q = find_inflight(rm, t, addr);
	/*
	 * The page again, urgently, rather than behind the bulk stream; but not
	 * when its answer is the next one on it, arriving now: a program that
	 * reads its memory in order faults right at the stream's front, and
	 * asking each such page again (the server answering it twice, the bulk
	 * stream held while an urgent answer is due) slowed the whole stream
	 * (bench/net/README.md).  It waits BULK_WAIT_MS for
	 * that answer, then asks (lr_remote_overdue()): a stalled answer is
	 * not waited for.
	 */
	bool again = q && !q->urgent && !serial_now(e), next = again && next_on_bulk(q);
	if (again && !next) {
		ret = ask_again(rm, q, addr, t0);
		pthread_mutex_unlock(&e->lock);
		if (ret == INSTALL_OK)
			watch(e);
		return ret;
	}
	if (q) {
		/* no second request: the copy that lands wakes this thread too */
		if (!q->faults++)
			q->t0 = t0;
		if (next && !q->waiter)
			q->waiter = (addr & ~(uint64_t)(PAGE - 1)) | 1; /* bit 0: set (page 0 is a page too) */
		pthread_mutex_unlock(&e->lock); /* the fault thread's loop bounds its next wait: lr_remote_overdue() */
		return INSTALL_OK;
	}
	pthread_mutex_unlock(&e->lock);
	ret = lr_zeropage(e, t, addr);
	if (ret == INSTALL_OK)
		lr_account_fault(e, 0, t0);
	return ret;
}

/* ---- events and forks: lock held, inside t's gate read side --------------- */

int lr_remote_reclaim(struct lr_engine *e, struct lr_task *t, uint64_t s, uint64_t end)
{
	if (!e->remote)
		return 0;
	for (struct lr_rreq *q = e->remote->inflight; q; q = q->next) {
		uint64_t rest = q->start + __atomic_load_n(&q->done, __ATOMIC_ACQUIRE);

		if (q->t != t || q->cancelled || rest >= q->end || rest >= end || q->end <= s)
			continue;
		__atomic_store_n(&q->cancelled, true, __ATOMIC_RELEASE);
		if (!q->dup && lr_ranges_add(&t->pending, rest, q->end, q->img + (rest - q->start)))
			return -1;
	}
	return 0;
}

int lr_remote_fork(struct lr_engine *e, struct lr_task *t, struct lr_task *child)
{
	if (!e->remote)
		return 0;
	for (struct lr_rreq *q = e->remote->inflight; q; q = q->next) {
		uint64_t rest = q->start + __atomic_load_n(&q->done, __ATOMIC_ACQUIRE);

		if (q->t == t && !q->cancelled && !q->dup && rest < q->end &&
		    lr_ranges_add(&child->pending, rest, q->end, q->img + (rest - q->start)))
			return -1;
	}
	return 0;
}

bool lr_remote_busy(struct lr_engine *e)
{
	return e->remote && e->remote->inflight;
}

/* ---- life cycle ------------------------------------------------------------ */

int lr_remote_create(struct lr_engine *e)
{
	struct lr_remote *rm = calloc(1, sizeof(*rm));

	if (!rm) {
		pr_err("out of memory for the page requests");
		return -1;
	}
	rm->e = e;
	rm->window = WINDOW_MAX;
	rm->slimit = SERIAL_MIN;
	pr_info("page source: background requests of %lu KiB, up to %u in flight (%u on a path whose bandwidth-delay "
		"product needs them), %u after a fault (more where the path needs them)",
		REQ_MAX >> 10, WINDOW_MAX, WINDOW_CAP, WINDOW_MIN);
	pr_info("page source: while there is no urgent connection (answers in request order), background bytes in "
		"flight: what drains in %.0f us (%lu KiB before it is measured), %lu KiB after a fault, doubling per "
		"answer asked since, none while a fault's answer is due",
		SERIAL_DELAY * 1e6, SERIAL_MIN >> 10, SERIAL_FAULT >> 10);
	pthread_mutex_init(&rm->alive, NULL);
	e->remote = rm;
	/* the completions copy: no worker, and the fault thread only sends */
	e->o.workers = 0;
	return 0;
}

void lr_remote_detach(struct lr_engine *e)
{
	struct lr_remote *rm = e->remote;
	bool last;

	if (!rm)
		return;
	pthread_mutex_lock(&rm->alive);
	if (rm->drain_time)
		pr_info("page source: drain rate %.0f MB/s (answers back to back), %llu KiB of them in flight at most "
			"while there is no urgent connection",
			rm->drain_bytes / rm->drain_time / 1e6, (unsigned long long)serial_cap(rm) >> 10);
	e->remote = NULL;
	rm->detached = true;
	for (unsigned i = 0; i < rm->nr_pool; i++)
		free(rm->pool[i]);
	rm->nr_pool = 0;
	last = __atomic_load_n(&rm->outstanding, __ATOMIC_SEQ_CST) == 0;
	pthread_mutex_unlock(&rm->alive);
	if (last) {
		pthread_mutex_destroy(&rm->alive);
		free(rm);
	}
	/* else the last completion (the source's close fails what is left) frees it */
}

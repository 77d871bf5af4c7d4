// SPDX-License-Identifier: MIT
/*
 * The fault thread's work: read a uffd's messages, apply its events to the
 * ranges, serve its faults (faulting page + adaptive fault-around window).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "lib/uffd-compat.h"
#include "plugin/engine/internal.h"
#include "plugin/log/log.h"

#define MSG_BATCH    64
#define MAX_DEFERRED 256

static int on_fork(struct lr_engine *e, struct lr_task *t, int ufd, uint64_t pos)
{
	int fl = fcntl(ufd, F_GETFL);

	if (fl < 0 || fcntl(ufd, F_SETFL, fl | O_NONBLOCK)) {
		pr_perror("fork of task %u: can't set up the child's uffd %d", t->src_pid, ufd);
		return -1;
	}
	struct lr_task *c = lr_task_new(e, ufd, 0, t->src_pid, 0, (int)t->idx, pos);
	return c ? lr_fork_ranges(e, t, c) : -1;
}

/* Lock held.  Returns -1 on a fatal error. */
static int apply_event(struct lr_engine *e, struct lr_task *t, const struct uffd_msg *m, uint64_t pos,
		       struct lr_task *child)
{
	switch (m->event) {
	case UFFD_EVENT_FORK:
		if (child) /* replay: the supervisor's dup of the child's uffd */
			return lr_fork_ranges(e, t, child);
		return on_fork(e, t, (int)m->arg.fork.ufd, pos);
	case UFFD_EVENT_REMAP: {
		uint64_t from = m->arg.remap.from, to = m->arg.remap.to, len = m->arg.remap.len;
		e->stats.remaps++;
		pr_debug("task %u: remap 0x%llx -> 0x%llx, %llu bytes", t->src_pid, (unsigned long long)from,
			 (unsigned long long)to, (unsigned long long)len);
		if (lr_claims_reclaim(e, t, from, from + len) || lr_claims_reclaim(e, t, to, to + len))
			return -1;
		return lr_ranges_remap(&t->pending, from, to, len);
	}
	case UFFD_EVENT_REMOVE:
	case UFFD_EVENT_UNMAP: {
		uint64_t s = m->arg.remove.start, end = m->arg.remove.end;
		if (m->event == UFFD_EVENT_REMOVE)
			e->stats.removes++;
		else
			e->stats.unmaps++;
		pr_debug("task %u: %s 0x%llx-0x%llx", t->src_pid, m->event == UFFD_EVENT_REMOVE ? "remove" : "unmap",
			 (unsigned long long)s, (unsigned long long)end);
		/* REMOVE'd pages must read zero from now on: drop them, never install them. */
		if (lr_claims_reclaim(e, t, s, end))
			return -1;
		return lr_ranges_drop(&t->pending, s, end);
	}
	default:
		pr_err("task %u: unexpected uffd event 0x%x", t->src_pid, m->event);
		return -1;
	}
}

int lr_apply_event(struct lr_engine *e, struct lr_task *t, const struct uffd_msg *m, struct lr_task *child)
{
	return apply_event(e, t, m, 0, child);
}

void lr_adapt_window(struct lr_task *t, uint64_t addr)
{
	if (!t->next_fault) /* first fault: start with the initial window */
		return;
	if (addr == t->next_fault) {
		if (t->window < FAULT_AROUND_MAX)
			t->window *= 2;
	} else if (t->window > 1) {
		t->window /= 2;
	}
}

/* Where the data for addr is, under lock: pending (claimed here) or a worker's claim. */
static int locate(struct lr_engine *e, struct lr_task *t, uint64_t addr, uint64_t *len, uint64_t *img)
{
	const struct lr_range *rp = lr_ranges_get(&t->pending, addr);

	if (rp) {
		struct lr_range r = *rp;
		lr_adapt_window(t, addr);
		uint64_t end = addr + (uint64_t)t->window * PAGE;
		if (end > r.end)
			end = r.end;
		*len = end - addr;
		*img = r.img + (addr - r.start);
		t->next_fault = end;
		/* Ours now: a worker must not take it, nor may an event miss it. */
		return lr_ranges_drop(&t->pending, addr, end) ? -1 : 1;
	}
	for (unsigned k = 0; k < NR_CLAIMS; k++) {
		struct lr_claim *c = &e->claims[k];
		/* done may be a step behind: then the page is there already and the copy meets EEXIST */
		if (c->t == t && !c->cancelled && addr >= c->start + __atomic_load_n(&c->done, __ATOMIC_ACQUIRE) &&
		    addr < c->end) {
			*len = PAGE;
			*img = c->img + (addr - c->start);
			return 2;
		}
	}
	return 0;
}

void lr_account_fault(struct lr_engine *e, uint64_t installed, double t0)
{
	uint64_t now_ns = lr_now_ns();
	double now = (double)now_ns / 1e9;

	__atomic_fetch_add(&e->fault_seq, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&e->last_fault_ns, now_ns, __ATOMIC_RELAXED);
	pthread_mutex_lock(&e->lock);
	e->stats.faults++;
	if (installed) {
		e->stats.fault_pages++;
		e->stats.fault_around_pages += installed / PAGE - 1;
	}
	if (!e->stats.t_first_fault)
		e->stats.t_first_fault = now;
	lr_stats_latency(&e->stats, (uint64_t)((now - t0) * 1e9));
	pthread_mutex_unlock(&e->lock);
}

/* Serve one fault; INSTALL_AGAIN asks the caller to read events and retry. */
static int serve_fault(struct lr_engine *e, struct lr_task *t, uint64_t addr, double t0)
{
	uint64_t len = 0, img = 0, done = 0, installed = 0;
	bool existed = false;
	int where, ret;

	addr &= ~(PAGE - 1);
	if (e->remote) /* an asynchronous source: remote.c */
		return lr_remote_fault(e, t, addr, t0);
	pthread_mutex_lock(&e->lock);
	if (t->gone) {
		pthread_mutex_unlock(&e->lock);
		return INSTALL_OK;
	}
	where = locate(e, t, addr, &len, &img);
	if (where > 0)
		lr_ws_note(e, t, img);
	e->hint_task = t;
	e->hint_addr = addr;
	pthread_mutex_unlock(&e->lock);
	if (where < 0) {
		lr_engine_fail(e, "out of memory in the fault path");
		return INSTALL_FATAL;
	}
	if (where == 0) {
		ret = lr_zeropage(e, t, addr);
	} else {
		ret = lr_install(e, t, addr, img, len, &done, &installed, &existed);
		if (where == 1 && done < len && ret != INSTALL_GONE) {
			/* whatever was not installed goes back for later */
			pthread_mutex_lock(&e->lock);
			if (!t->gone && lr_ranges_add(&t->pending, addr + done, addr + len, img + done))
				ret = INSTALL_FATAL;
			pthread_cond_broadcast(&e->work);
			pthread_mutex_unlock(&e->lock);
		}
		if (ret == INSTALL_OK && existed)
			lr_wake(t, addr, PAGE);
	}
	if (ret == INSTALL_OK)
		lr_account_fault(e, installed, t0);
	return ret;
}

/*
 * Where the next messages of t are read to: straight into its journal area
 * when there is one (so they are on record even if we die right after).
 */
static struct uffd_msg *read_target(struct lr_engine *e, struct lr_task *t, struct uffd_msg *local, size_t *space)
{
	struct lr_journal *j = e->o.journal;

	*space = MSG_BATCH;
	if (!j || j->head->full[t->idx])
		return local;
	if (t->jpos + MSG_BATCH > LR_JOURNAL_MSGS) {
		pr_warn("task %u: uffd journal full; a crash of the engine can't be survived now", t->src_pid);
		j->head->full[t->idx] = 1;
		return local;
	}
	return lr_journal_area(j, t->idx) + t->jpos;
}

/* How long a read waited at the gate: the part of a fault's latency spent behind a worker's copy. */
static void note_gate_wait(struct lr_stats *s, double secs)
{
	uint64_t ns = (uint64_t)(secs * 1e9);

	s->gate_reads++;
	if (ns < 1000) /* uncontended: the time of the clock reads themselves */
		return;
	s->gate_waits++;
	s->gate_wait_ns += ns;
	if (ns > s->gate_wait_max_ns)
		s->gate_wait_max_ns = ns;
}

static int read_batch(struct lr_engine *e, struct lr_task *t, struct uffd_msg *msgs, int *nr)
{
	size_t space;
	struct uffd_msg *buf = read_target(e, t, msgs, &space);
	uint64_t pos = t->jpos;
	ssize_t n;
	int ret = 0;

	double g0 = lr_now();
	lr_prefetch_gate_read_lock(e, t);
	note_gate_wait(&e->stats, lr_now() - g0);
	do
		n = read(t->uffd, buf, space * sizeof(*buf));
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		*nr = 0;
		ret = errno == EAGAIN ? 0 : -1;
		if (ret)
			pr_perror("task %u: read of uffd %d", t->src_pid, t->uffd);
		goto out;
	}
	*nr = (int)(n / sizeof(*buf));
	bool events = false;
	for (int i = 0; i < *nr; i++)
		events |= buf[i].event != UFFD_EVENT_PAGEFAULT;
	if (buf != msgs) {
		memcpy(msgs, buf, *nr * sizeof(*buf));
		/*
		 * A batch of faults only is overwritten by the next read: a restart
		 * needs the events, and faults left beyond the end are ignored.
		 */
		if (events)
			t->jpos += *nr;
	}
	if (!events) /* the common case: no need for the engine lock */
		goto out;
	pthread_mutex_lock(&e->lock);
	for (int i = 0; i < *nr && !ret; i++)
		if (msgs[i].event != UFFD_EVENT_PAGEFAULT && apply_event(e, t, &msgs[i], pos + (uint64_t)i, NULL))
			ret = -1;
	pthread_mutex_unlock(&e->lock);
out:
	lr_gate_read_unlock(&t->gate);
	return ret;
}

/* Wait a little for the event that makes the mm busy to show up. */
static void wait_readable(struct lr_task *t)
{
	struct pollfd p = {.fd = t->uffd, .events = POLLIN};
	if (poll(&p, 1, 1) < 0 && errno != EINTR)
		pr_perror("poll of uffd %d", t->uffd);
}

int lr_drain_uffd(struct lr_engine *e, struct lr_task *t)
{
	struct uffd_msg msgs[MSG_BATCH];
	uint64_t deferred[MAX_DEFERRED];
	double deferred_t0[MAX_DEFERRED];
	int nr, nd = 0;

	for (;;) {
		/* Latency counts from before the read: waiting at the gate is part of it. */
		double t0 = lr_now();
		if (read_batch(e, t, msgs, &nr)) {
			lr_engine_fail(e, "bad message from a uffd");
			return -1;
		}
		for (int i = 0; i < nr; i++) {
			if (msgs[i].event != UFFD_EVENT_PAGEFAULT)
				continue;
			lr_follow_fault(e, t, msgs[i].arg.pagefault.feat.ptid);
			int r = serve_fault(e, t, msgs[i].arg.pagefault.address, t0);
			if (r == INSTALL_FATAL)
				return -1;
			if (r == INSTALL_GONE) {
				pthread_mutex_lock(&e->lock);
				lr_task_gone(e, t);
				pthread_mutex_unlock(&e->lock);
				return 0;
			}
			if (r == INSTALL_AGAIN && nd == MAX_DEFERRED) /* it faults again after this */
				lr_wake(t, msgs[i].arg.pagefault.address & ~(PAGE - 1), PAGE);
			else if (r == INSTALL_AGAIN) {
				deferred_t0[nd] = t0;
				deferred[nd++] = msgs[i].arg.pagefault.address;
			}
		}
		/*
		 * A short batch emptied the uffd: epoll reports the next message, so
		 * no second read (and wait at the gate) before the thread moves on.
		 */
		if (nr == MSG_BATCH || (nr > 0 && nd))
			continue;
		if (!nd)
			return 0;
		/* Retry faults that met a changing mm once its events are read. */
		int left = 0;
		for (int i = 0; i < nd; i++) {
			int r = serve_fault(e, t, deferred[i], deferred_t0[i]);
			if (r == INSTALL_FATAL)
				return -1;
			if (r == INSTALL_AGAIN) {
				deferred_t0[left] = deferred_t0[i];
				deferred[left++] = deferred[i];
			}
		}
		nd = left;
		if (nd)
			wait_readable(t);
	}
}

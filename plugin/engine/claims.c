// SPDX-License-Identifier: MIT
/*
 * The state the fault path and prefetch share, one layer below both: tasks,
 * prefetch claims, the stage and failure.  fault.c and prefetch.c call this
 * file and uffdops.c, never each other; engine.c drives them all.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "plugin/engine/internal.h"
#include "plugin/engine/tree.h"
#include "plugin/log/log.h"

void lr_engine_kick(struct lr_engine *e)
{
	uint64_t one = 1;
	if (write(e->wakefd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		pr_perror("engine wake-up");
}

struct lr_task *lr_task_new(struct lr_engine *e, int uffd, uint32_t vpid, uint32_t src_pid, pid_t real_pid, int parent,
			    uint64_t fork_pos)
{
	struct lr_task *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	if (e->nr_tasks == e->cap_tasks) {
		size_t cap = e->cap_tasks ? e->cap_tasks * 2 : 16;
		struct lr_task **v = realloc(e->tasks, cap * sizeof(*v));
		if (!v) {
			free(t);
			return NULL;
		}
		e->tasks = v;
		e->cap_tasks = cap;
	}
	if (e->o.journal && e->nr_tasks >= LR_JOURNAL_TASKS) {
		pr_err("more than %u tasks: the supervisor can't keep them", LR_JOURNAL_TASKS);
		free(t);
		return NULL;
	}
	/* The supervisor must hold a dup before we act on the uffd. */
	if (parent >= -1 && e->o.new_task &&
	    e->o.new_task(e->o.arg, (unsigned)e->nr_tasks, uffd, vpid, real_pid, parent, fork_pos)) {
		free(t);
		return NULL;
	}
	t->idx = (unsigned)e->nr_tasks;
	t->uffd = uffd;
	t->vpid = vpid;
	t->src_pid = src_pid;
	t->real_pid = real_pid;
	t->window = FAULT_AROUND_START;
	lr_ranges_init(&t->pending);
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = t};
	if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, uffd, &ev)) {
		pr_perror("can't watch uffd %d of task %u", uffd, src_pid);
		free(t);
		return NULL;
	}
	e->tasks[e->nr_tasks++] = t;
	return t;
}

bool lr_stage_enter(struct lr_engine *e, int s)
{
	int cur = lr_stage(e);

	while (cur < s)
		if (__atomic_compare_exchange_n(&e->stage, &cur, s, false, __ATOMIC_SEQ_CST, __ATOMIC_ACQUIRE))
			return true;
	return false;
}

/*
 * Whether epfd has something for the fault thread.  What it found is kept for
 * the thread's next dispatch (lr_take_ready()), which then needs no second
 * epoll_wait: a system call is a microsecond of every fault on a paravirtual
 * host (level-triggered, so an event not taken is reported again).
 */
bool lr_fault_waiting(struct lr_engine *e)
{
	if (!e->have_ready)
		e->have_ready = epoll_wait(e->epfd, &e->ready, 1, 0) > 0;
	return e->have_ready;
}

int lr_take_ready(struct lr_engine *e, struct epoll_event *ev)
{
	if (!e->have_ready)
		return 0;
	*ev = e->ready;
	e->have_ready = false;
	return 1;
}

/* Lock held. */
void lr_task_gone(struct lr_engine *e, struct lr_task *t)
{
	if (t->gone)
		return;
	t->gone = true;
	lr_ranges_free(&t->pending);
	for (unsigned i = 0; i < NR_CLAIMS; i++)
		if (e->claims[i].t == t)
			__atomic_store_n(&e->claims[i].cancelled, true, __ATOMIC_RELEASE);
	epoll_ctl(e->epfd, EPOLL_CTL_DEL, t->uffd, NULL);
	e->stats.tasks_gone++;
	pr_debug("task %u (pid %d) is gone", t->src_pid, t->real_pid);
}

/* Lock held. */
void lr_engine_fail_locked(struct lr_engine *e, const char *why)
{
	pid_t pids[256];
	size_t n = 0;

	if (!lr_stage_enter(e, STAGE_FAILED))
		return;
	pr_err("%s; killing the restored tree", why);
	for (size_t i = 0; i < e->nr_tasks && n < 256; i++)
		if (e->tasks[i]->real_pid > 0)
			pids[n++] = e->tasks[i]->real_pid;
	lr_tree_kill(pids, n);
	pthread_cond_broadcast(&e->work);
	lr_engine_kick(e);
}

void lr_engine_fail(struct lr_engine *e, const char *why)
{
	pthread_mutex_lock(&e->lock);
	lr_engine_fail_locked(e, why);
	pthread_mutex_unlock(&e->lock);
}

/* Give every claim overlapping [s,e) back to pending, so the event sees it. */
int lr_claims_reclaim(struct lr_engine *e, struct lr_task *t, uint64_t s, uint64_t end)
{
	for (unsigned i = 0; i < NR_CLAIMS; i++) {
		struct lr_claim *c = &e->claims[i];
		uint64_t rest = c->start + c->done;

		if (c->t != t || c->cancelled || rest >= c->end || rest >= end || c->end <= s)
			continue;
		__atomic_store_n(&c->cancelled, true, __ATOMIC_RELEASE);
		if (lr_ranges_add(&t->pending, rest, c->end, c->img + c->done))
			return -1;
	}
	return lr_remote_reclaim(e, t, s, end);
}

int lr_fork_ranges(struct lr_engine *e, struct lr_task *t, struct lr_task *c)
{
	if (lr_ranges_copy(&c->pending, &t->pending))
		return -1;
	/* Pages a worker had claimed but not installed before the fork are missing in the child too. */
	for (unsigned i = 0; i < NR_CLAIMS; i++) {
		struct lr_claim *cl = &e->claims[i];
		if (cl->t == t && !cl->cancelled && cl->start + cl->done < cl->end &&
		    lr_ranges_add(&c->pending, cl->start + cl->done, cl->end, cl->img + cl->done))
			return -1;
	}
	if (lr_remote_fork(e, t, c))
		return -1;
	c->window = t->window;
	e->stats.forks++;
	pthread_cond_broadcast(&e->work);
	pr_debug("task %u forked: child uffd %d, %llu pages pending", t->src_pid, c->uffd,
		 (unsigned long long)c->pending.pages);
	return 0;
}

/* Lock held: the task to prefetch next, or NULL. */
static struct lr_task *next_task(struct lr_engine *e)
{
	if (e->hint_task && !e->hint_task->gone && e->hint_task->pending.pages)
		return e->hint_task;
	for (size_t k = 0; k < e->nr_tasks; k++) {
		struct lr_task *t = e->tasks[(e->rr + k) % e->nr_tasks];
		if (!t->gone && t->pending.pages) {
			e->rr = (e->rr + k) % e->nr_tasks;
			e->hint_task = t;
			e->hint_addr = lr_ranges_first(&t->pending)->start;
			return t;
		}
	}
	return NULL;
}

bool lr_pending_work(struct lr_engine *e)
{
	for (size_t k = 0; k < e->nr_tasks; k++)
		if (!e->tasks[k]->gone && e->tasks[k]->pending.pages)
			return true;
	return false;
}

/*
 * Lock held: claim into slot c the working set's next run, else a chunk near
 * the latest fault; false when nothing is left (or the prefetch waits).
 */
bool lr_claim_take(struct lr_engine *e, struct lr_claim *c)
{
	struct lr_task *t = NULL;
	struct lr_range r;
	/*
	 * Where a copy beside a faulting program slows it (cpuprobe.c: workers
	 * wait for calm spells), the working set's scattered pages are no
	 * exception: replayed while the program faulted, they held it up for the
	 * whole replay (bench/apps/README.md).  There they wait for a calm spell.
	 */
	bool ws = (!e->o.workers_calm || e->follow.on || lr_prefetch_calm(e)) && lr_ws_take(e, &t, &r);

	if (!ws &&
	    (lr_ws_hold_in(e) || !(t = next_task(e)) || lr_ranges_pick(&t->pending, e->hint_addr, PREFETCH_CHUNK, &r)))
		return false;
	if (lr_ranges_drop(&t->pending, r.start, r.end)) {
		/* the ranges can't be kept track of: stop, as the fault path does, rather than spin */
		lr_engine_fail_locked(e, "out of memory in prefetch");
		return false;
	}
	/* the copier's pace (step, faults seen, calm) carries over from its last chunk */
	*c = (struct lr_claim){.t = t,
			       .start = r.start,
			       .end = r.end,
			       .img = r.img,
			       .buf = c->buf,
			       .step = c->step,
			       .faults = c->faults,
			       .calm = c->calm,
			       .ws = ws};
	if (!ws)
		e->hint_addr = r.end; /* the next worker continues after this chunk */
	return true;
}

/* Lock held: a claim not finished and not taken back by an event goes back to pending. */
void lr_claim_release(struct lr_engine *e, struct lr_claim *c)
{
	if (!c->cancelled && !c->t->gone && c->start + c->done < c->end &&
	    lr_ranges_add(&c->t->pending, c->start + c->done, c->end, c->img + c->done))
		lr_engine_fail_locked(e, "out of memory in prefetch");
	if (c->ws)
		lr_ws_run_over(e);
	c->t = NULL;
}

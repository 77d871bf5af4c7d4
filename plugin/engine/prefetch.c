// SPDX-License-Identifier: MIT
/*
 * Background prefetch: after restore has finished, worker threads stream the
 * remaining ranges in 2 MiB chunks, starting near the most recent fault and
 * moving across all tasks.  Each chunk is "claimed" so the fault thread knows
 * it is in flight; it is copied in PREFETCH_STEP pieces inside the task's
 * gate so a fault never waits behind more than one piece.
 */
#include <errno.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "plugin/engine/internal.h"
#include "plugin/log/log.h"

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
			e->hint_addr = t->pending.v[0].start;
			return t;
		}
	}
	return NULL;
}

/* Lock held: claim a chunk into slot c, or return false when nothing is left. */
static bool take_chunk(struct lr_engine *e, struct lr_claim *c)
{
	struct lr_task *t = next_task(e);
	struct lr_range r;

	if (!t || lr_ranges_pick(&t->pending, e->hint_addr, PREFETCH_CHUNK, &r))
		return false;
	if (lr_ranges_drop(&t->pending, r.start, r.end))
		return false;
	*c = (struct lr_claim){.t = t, .start = r.start, .end = r.end, .img = r.img};
	e->hint_addr = r.end; /* the next worker continues after this chunk */
	return true;
}

/*
 * Copy a claimed chunk; returns when it is done, taken back or failed.  No
 * engine lock per step: cancellation is written by the fault thread only
 * while it is inside the gate, so reading it inside the gate is enough, and
 * done is read outside the gate only to find pages still in flight.
 */
static void copy_chunk(struct lr_engine *e, struct lr_claim *c)
{
	struct lr_task *t = c->t;
	uint64_t len = c->end - c->start;
	const void *data;

	/* The claim's source is found and mapped once (one madvise per 2 MiB), the steps copy from it. */
	if (lr_source(e, t, c->start, c->img, len, &data))
		return;
	while (c->done < len) {
		uint64_t off = c->done, step = len - off < e->o.prefetch_step ? len - off : e->o.prefetch_step;
		uint64_t done = 0, installed = 0;
		int r;

		lr_gate_copy_enter(&t->gate);
		if (__atomic_load_n(&c->cancelled, __ATOMIC_ACQUIRE) || __atomic_load_n(&e->stop, __ATOMIC_ACQUIRE)) {
			lr_gate_copy_exit(&t->gate);
			return;
		}
		r = lr_copy(e, t, c->start + off, (const uint8_t *)data + off, step, &done, &installed, NULL);
		__atomic_store_n(&c->done, off + done, __ATOMIC_RELEASE);
		__atomic_fetch_add(&e->stats.prefetch_pages, installed / PAGE, __ATOMIC_RELAXED);
		lr_gate_copy_exit(&t->gate);
		if (r == INSTALL_GONE) {
			pthread_mutex_lock(&e->lock);
			lr_task_gone(e, t);
			pthread_mutex_unlock(&e->lock);
		}
		if (r == INSTALL_GONE || r == INSTALL_FATAL)
			return;
		if (r == INSTALL_AGAIN) { /* the fault thread reads the event; try again soon */
			struct timespec ts = {0, 50 * 1000};
			nanosleep(&ts, NULL);
		}
	}
}

static void *worker(void *arg)
{
	struct lr_worker *w = arg;
	struct lr_engine *e = w->e;
	struct lr_claim *c = &e->claims[w->slot];

	/* Background work yields the CPU to the restored program (2 cores here). */
	if (setpriority(PRIO_PROCESS, (id_t)gettid(), PREFETCH_NICE))
		pr_debug("prefetch worker keeps its priority: %m");
	pthread_mutex_lock(&e->lock);
	for (;;) {
		while (!e->stop && !(e->finished && take_chunk(e, c)))
			pthread_cond_wait(&e->work, &e->lock);
		if (e->stop)
			break;
		pthread_mutex_unlock(&e->lock);
		copy_chunk(e, c);
		pthread_mutex_lock(&e->lock);
		/* not finished and not taken back by an event: it goes back */
		if (!c->cancelled && !c->t->gone && c->start + c->done < c->end &&
		    lr_ranges_add(&c->t->pending, c->start + c->done, c->end, c->img + c->done))
			lr_engine_fail_locked(e, "out of memory in prefetch");
		c->t = NULL;
		pthread_mutex_unlock(&e->lock);
		lr_engine_kick(e); /* the fault thread checks whether all is resident */
		pthread_mutex_lock(&e->lock);
	}
	c->t = NULL;
	pthread_mutex_unlock(&e->lock);
	return NULL;
}

int lr_prefetch_start(struct lr_engine *e)
{
	for (unsigned i = 0; i < e->o.workers; i++) {
		e->workers[i] = (struct lr_worker){.e = e, .slot = i};
		if (pthread_create(&e->workers[i].th, NULL, worker, &e->workers[i])) {
			pr_err("can't start prefetch worker %u", i);
			lr_engine_fail(e, "prefetch workers unavailable");
			return -1;
		}
		e->nr_workers = i + 1;
	}
	return 0;
}

void lr_prefetch_stop(struct lr_engine *e)
{
	pthread_mutex_lock(&e->lock);
	e->stop = true;
	pthread_cond_broadcast(&e->work);
	pthread_mutex_unlock(&e->lock);
	for (unsigned i = 0; i < e->nr_workers; i++)
		pthread_join(e->workers[i].th, NULL);
	e->nr_workers = 0;
}

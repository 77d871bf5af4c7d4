// SPDX-License-Identifier: MIT
/*
 * Background prefetch: after restore has finished, worker threads stream the
 * remaining ranges in 2 MiB chunks, starting near the most recent fault and
 * moving across all tasks.  Each chunk is "claimed" so the fault thread knows
 * it is in flight; it is copied in PREFETCH_STEP pieces inside the task's
 * gate so a fault never waits behind more than one piece.
 */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "plugin/engine/internal.h"
#include "plugin/log/log.h"

/*
 * Scheduling changes go to the thread id through the system call, never
 * through pthread_setschedparam(): glibc holds the target thread's internal
 * lock across that call, so a worker that had just put itself in SCHED_IDLE
 * and lost its CPU inside it would keep the fault thread, raising it, waiting
 * for as long as the CPUs stay busy.  tid 0 (not started yet) is left alone.
 */
static void sched_set(pid_t tid, int policy, int prio)
{
	struct sched_param sp = {.sched_priority = prio};

	if (tid > 0 && sched_setscheduler(tid, policy, &sp))
		pr_debug("prefetch worker %d: can't set scheduling policy %d: %m", tid, policy);
}

/*
 * Background work in idle time (SCHED_IDLE).  While the fault thread follows
 * the program (follow.c), the workers off its CPU run at the lowest priority
 * of SCHED_OTHER instead: a CPU that runs SCHED_IDLE work only counts as idle
 * to the scheduler, which would wake the program there, away from us.
 */
static bool away(const struct lr_worker *w)
{
	return w->e->follow.on && !w->near;
}

static void sched_idle(const struct lr_worker *w, pid_t tid, bool on)
{
	sched_set(tid, on && !away(w) ? SCHED_IDLE : SCHED_OTHER, 0);
}

/*
 * A worker the fault thread waits for at a gate runs at once: SCHED_FIFO for
 * the rest of its one piece of copy, if allowed (a SCHED_OTHER thread at the
 * worker's nice level can wait a scheduler slice behind the restored program).
 */
static void sched_boost(const struct lr_worker *w, pid_t tid)
{
	struct sched_param sp = {.sched_priority = 1};

	if (tid > 0 && sched_setscheduler(tid, SCHED_FIFO, &sp))
		sched_idle(w, tid, false);
}

/* Back to idle time, unless lr_prefetch_stop() began: then idle would be for good. */
static void enter_idle(const struct lr_worker *w, pid_t tid)
{
	sched_idle(w, tid, true);
	if (lr_stage(w->e) >= STAGE_STOPPING) /* lr_prefetch_stop() may have raised it just before */
		sched_idle(w, tid, false);
}

/*
 * Claim a chunk into c; lock not held.  A mapping source is asked for the whole
 * chunk at once (one madvise per 2 MiB), a copying one step by step.
 */
static bool claim(struct lr_engine *e, struct lr_claim *c)
{
	pthread_mutex_lock(&e->lock);
	int st = lr_stage(e);
	bool got = st >= STAGE_FINISHED && st < STAGE_STOPPING && lr_claim_take(e, c);
	pthread_mutex_unlock(&e->lock);
	if (got && !e->src->copies && lr_source(e, c->t, c->start, c->img, c->end - c->start, NULL, &c->data)) {
		pthread_mutex_lock(&e->lock);
		lr_claim_release(e, c);
		pthread_mutex_unlock(&e->lock);
		return false;
	}
	return got;
}

/* A raised worker back to idle time, by whichever of it and the fault thread takes the flag. */
static void unboost(struct lr_worker *w, pid_t tid)
{
	if (__atomic_exchange_n(&w->boosted, false, __ATOMIC_SEQ_CST) && lr_stage(w->e) < STAGE_STOPPING)
		enter_idle(w, tid);
}

/*
 * A worker inside a task's gate holds up the fault thread's read of that uffd.
 * Preempted there in SCHED_IDLE, it would wait until a core has nothing else
 * to run (a busy program and the fault thread keep both busy): an inversion
 * seen as millisecond fault waits.  So when the fault thread's spin at the
 * gate runs out, it raises the worker inside (sched_boost), and the worker
 * goes back to idle time when it leaves the gate, between pieces too.
 */
static void gate_enter(struct lr_worker *w, struct lr_task *t)
{
	__atomic_store_n(&w->in_gate, t, __ATOMIC_SEQ_CST);
	lr_gate_copy_enter(&t->gate);
	/* raised while it waited to enter: the reader that wanted it out is gone */
	unboost(w, __atomic_load_n(&w->tid, __ATOMIC_RELAXED));
}

static void gate_exit(struct lr_worker *w, struct lr_task *t)
{
	lr_gate_copy_exit(&t->gate);
	__atomic_store_n(&w->in_gate, NULL, __ATOMIC_SEQ_CST);
	unboost(w, __atomic_load_n(&w->tid, __ATOMIC_RELAXED));
}

struct gate_stall {
	struct lr_engine *e;
	struct lr_task *t;
};

static void raise_gate_holders(void *arg)
{
	struct gate_stall *gs = arg;

	for (unsigned i = 0; i < MAX_WORKERS; i++) {
		struct lr_worker *w = &gs->e->workers[i];
		if (__atomic_load_n(&w->in_gate, __ATOMIC_SEQ_CST) != gs->t)
			continue;
		/*
		 * Raised first, flagged after, so that its own unboost() comes after
		 * the raise; if it left the gate in between (and missed the flag), the
		 * flag is taken back here: a worker never stays raised past its gate.
		 */
		pid_t tid = __atomic_load_n(&w->tid, __ATOMIC_SEQ_CST);
		sched_boost(w, tid);
		__atomic_store_n(&w->boosted, true, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&w->in_gate, __ATOMIC_SEQ_CST) != gs->t)
			unboost(w, tid);
	}
}

void lr_prefetch_gate_read_lock(struct lr_engine *e, struct lr_task *t)
{
	struct gate_stall gs = {e, t};
	/* the near worker shares our CPU (follow.c): it can't leave the gate while we spin */
	bool near_inside =
	    e->nr_workers && e->workers[0].near && __atomic_load_n(&e->workers[0].in_gate, __ATOMIC_SEQ_CST) == t;

	lr_gate_read_lock_stalled(&t->gate, near_inside ? 0 : LR_GATE_SPIN_NS, raise_gate_holders, &gs);
}

static uint64_t since_fault_ns(struct lr_engine *e)
{
	return lr_now_ns() - __atomic_load_n(&e->last_fault_ns, __ATOMIC_RELAXED);
}

bool lr_prefetch_calm(struct lr_engine *e)
{
	return since_fault_ns(e) >= PREFETCH_CALM_NS;
}

/*
 * One step of a claim: its data from the source (read into the copier's buffer
 * outside the gate, or the source's mapping), then UFFDIO_COPYs of at most
 * PREFETCH_STEP_MIN each (PREFETCH_PIECE_NEAR while faults come, PREFETCH_PIECE_CALM
 * once none came for PREFETCH_CALM_NS), so that a fault waits behind one of those only: a
 * worker leaves the gate between them when the fault thread wants in, the
 * fault thread (its own claim, ungated) stops when a uffd has something to
 * read.  False once the claim is done, taken back or failed.  No engine lock:
 * cancellation is written by the fault thread only inside the gate's read
 * side, so a worker reads it inside the gate; done is read outside the gate
 * only to find pages still in flight.
 */
static bool claim_step(struct lr_engine *e, struct lr_claim *c, struct lr_worker *w)
{
	struct lr_task *t = c->t;
	bool gated = w != NULL; /* the fault thread's own claim copies ungated */
	uint64_t len = c->end - c->start, off = c->done;
	uint64_t faults = __atomic_load_n(&e->fault_seq, __ATOMIC_RELAXED);
	const uint8_t *data;
	int r = INSTALL_OK;
	bool stopped = false;

	if (off >= len)
		return false;
	/*
	 * Small steps while faults come.  A worker's grow by doubling once
	 * PREFETCH_CALM_STEPS saw none and are copied in small pieces until then
	 * (a fault may wait at the gate behind one).  The fault thread's own grow
	 * by PREFETCH_STEP_MIN per step without a fault, as stock criu's requests
	 * do, in pieces of PREFETCH_STEP_MIN: it looks for a fault between pieces
	 * itself, so a fault never waits behind more than one.
	 */
	/* following, a worker away from the program's CPU takes none of its time: only its pieces stay small */
	bool far = w && away(w);
	if ((faults != c->faults && !far) || !c->step) {
		c->step = PREFETCH_STEP_MIN;
		c->calm = 0;
	} else if (!gated) {
		c->step += PREFETCH_STEP_MIN;
	} else if (c->calm < PREFETCH_CALM_STEPS) {
		c->calm++;
	} else if (c->step < e->o.prefetch_step)
		c->step *= 2;
	if (c->step > e->o.prefetch_step)
		c->step = e->o.prefetch_step;
	c->faults = faults;
	uint64_t step = len - off < c->step ? len - off : c->step;
	bool near = w && w->near; /* small pieces, and none once a fault came: see wait_calm() */
	uint64_t piece = near						   ? PREFETCH_PIECE_NEAR
			 : lr_prefetch_calm(e)				   ? PREFETCH_PIECE_CALM
			 : gated && (far || c->calm < PREFETCH_CALM_STEPS) ? PREFETCH_PIECE_NEAR
									   : PREFETCH_STEP_MIN;
	/* the file read happens outside the gate: only the copy must not start during an event read */
	if (e->src->copies && off >= c->buf_at && off < c->buf_at + c->buf_len) {
		data = c->buf + (off - c->buf_at); /* read before a fault came: not read again */
		step = c->buf_at + c->buf_len - off;
	} else if (e->src->copies) {
		const void *p;
		c->buf_len = 0;
		if (lr_source(e, t, c->start + off, c->img + off, step, c->buf, &p))
			return false;
		data = p;
		c->buf_at = off;
		c->buf_len = step;
	} else {
		data = (const uint8_t *)c->data + off;
	}
	if (gated)
		gate_enter(w, t);
	for (uint64_t sub = 0; sub < step && r == INSTALL_OK && !stopped;) {
		uint64_t l = step - sub < piece ? step - sub : piece, done = 0, installed = 0;
		if (sub && gated && lr_gate_reader_waits(&t->gate)) {
			gate_exit(w, t);
			gate_enter(w, t);
		}
		/* the fault thread looks after the step's read too: a fault may have come during it */
		if ((sub || e->src->copies) && !gated && lr_fault_waiting(e))
			break;
		stopped = __atomic_load_n(&c->cancelled, __ATOMIC_ACQUIRE) || lr_stage(e) >= STAGE_STOPPING;
		if (stopped || (near && __atomic_load_n(&e->fault_seq, __ATOMIC_RELAXED) != faults))
			break;
		r = lr_copy(e, t, c->start + off + sub, data + sub, l, &done, &installed, NULL);
		sub += done;
		__atomic_store_n(&c->done, off + sub, __ATOMIC_RELEASE);
		__atomic_fetch_add(&e->stats.prefetch_pages, installed / PAGE, __ATOMIC_RELAXED);
	}
	if (gated)
		gate_exit(w, t);
	if (r == INSTALL_GONE) {
		pthread_mutex_lock(&e->lock);
		lr_task_gone(e, t);
		pthread_mutex_unlock(&e->lock);
	}
	if (r == INSTALL_GONE || r == INSTALL_FATAL || stopped)
		return false;
	if (r == INSTALL_AGAIN && gated) { /* the fault thread reads the event; try again soon */
		struct timespec ts = {0, 50 * 1000};
		nanosleep(&ts, NULL);
	}
	return c->done < len;
}

/*
 * Where a worker beside a faulting program makes each fault slower (the
 * program's thread must preempt it on the CPU it slept on: cpuprobe.c), a
 * worker starts a step only once PREFETCH_CALM_NS passed with no fault served;
 * meanwhile the fault thread's own steps stream, as with --workers 0.  It
 * sleeps until the fault thread sees the calm (lr_prefetch_calm_in()), not on
 * a timer: a timer would wake it, and so preempt the program, every spell.
 */

static void wait_calm(struct lr_worker *w)
{
	struct lr_engine *e = w->e;
	/*
	 * Following (follow.c), the near worker shares the fault thread's CPU:
	 * preempted inside a gate, it holds up the next fault until raised, so
	 * it copies in calm spells only; the others never share it.
	 */
	bool waits = e->follow.on ? w->near : e->o.workers_calm;

	if (!waits || lr_prefetch_calm(e))
		return;
	pthread_mutex_lock(&e->lock);
	while (lr_stage(e) < STAGE_STOPPING && !lr_prefetch_calm(e)) {
		if (!e->calm_waiters++) /* a fault thread asleep for good must set itself a timeout */
			lr_engine_kick(e);
		pthread_cond_wait(&e->calm, &e->lock);
		e->calm_waiters--;
	}
	pthread_mutex_unlock(&e->lock);
}

int lr_prefetch_calm_in(struct lr_engine *e)
{
	if (!e->calm_waiters)
		return -1;
	uint64_t since = since_fault_ns(e);
	if (since >= PREFETCH_CALM_NS) {
		pthread_cond_broadcast(&e->calm);
		return -1;
	}
	return (int)((PREFETCH_CALM_NS - since) / 1000000) + 1;
}

/*
 * The workers copy in idle CPU time only (SCHED_IDLE): a waking restored
 * program, or criu finishing the restore, preempts them at once, so prefetch
 * takes no more of the program's CPU than the fault thread's own steps, as
 * stock criu's one thread does.  A starved worker's claim is taken back by the
 * fault thread (steal()), and at the end they leave SCHED_IDLE to be joined.
 */

static void *worker(void *arg)
{
	struct lr_worker *w = arg;
	struct lr_engine *e = w->e;
	struct lr_claim *c = &e->claims[w->slot];

	pid_t tid = gettid();

	/* Background work yields the CPU to the restored program. */
	if (setpriority(PRIO_PROCESS, (id_t)tid, away(w) ? PREFETCH_NICE_AWAY : PREFETCH_NICE))
		pr_debug("prefetch worker keeps its priority: %m");
	__atomic_store_n(&w->tid, tid, __ATOMIC_SEQ_CST);
	lr_follow_worker(e, w, tid);
	enter_idle(w, tid);
	for (;;) {
		pthread_mutex_lock(&e->lock);
		while (lr_stage(e) < STAGE_STOPPING &&
		       !(lr_stage(e) >= STAGE_FINISHED && lr_pending_work(e) && !lr_ws_hold_in(e)))
			pthread_cond_wait(&e->work, &e->lock);
		bool stop = lr_stage(e) >= STAGE_STOPPING;
		pthread_mutex_unlock(&e->lock);
		if (stop)
			break;
		wait_calm(w);
		if (!claim(e, c))
			continue;
		/* the near worker lets its claim go when a fault stops it: see claim_step() */
		while (claim_step(e, c, w) && !(w->near && !lr_prefetch_calm(e)))
			wait_calm(w);
		pthread_mutex_lock(&e->lock);
		struct lr_claim whole = *c; /* thp.c looks at the extent once the claim is released */
		lr_claim_release(e, c);
		bool last = !lr_pending_work(e);
		pthread_mutex_unlock(&e->lock);
		if (whole.done == whole.end - whole.start && !whole.cancelled)
			lr_thp_claim_done(e, whole.t, whole.start, whole.img, whole.done);
		/* the fault thread checks whether all is resident (a wake-up per claim would take the program's CPU) */
		if (last)
			lr_engine_kick(e);
	}
	return NULL;
}

/*
 * Nothing left to claim: take back the rest of the worker claim with the most
 * left, inside its task's gate (no copy of that task is running or can start;
 * the worker sees `cancelled` at its next step), and claim from it.
 */
static bool steal(struct lr_engine *e, struct lr_claim *own)
{
	struct lr_claim *best = NULL;
	struct lr_task *t = NULL;
	uint64_t most = 0;

	pthread_mutex_lock(&e->lock);
	for (unsigned i = 0; i < OWN_CLAIM; i++) {
		struct lr_claim *c = &e->claims[i];
		uint64_t left =
		    c->t && !c->cancelled ? c->end - c->start - __atomic_load_n(&c->done, __ATOMIC_ACQUIRE) : 0;
		if (left > most) {
			most = left;
			best = c;
			t = c->t;
		}
	}
	pthread_mutex_unlock(&e->lock);
	if (!best || most <= PREFETCH_STEP_MIN)
		return false;
	lr_gate_read_lock(&t->gate);
	pthread_mutex_lock(&e->lock);
	if (best->t == t && !best->cancelled && !t->gone && best->start + best->done < best->end) {
		__atomic_store_n(&best->cancelled, true, __ATOMIC_RELEASE);
		if (lr_ranges_add(&t->pending, best->start + best->done, best->end, best->img + best->done))
			lr_engine_fail_locked(e, "out of memory in prefetch");
	}
	pthread_mutex_unlock(&e->lock);
	lr_gate_read_unlock(&t->gate);
	return claim(e, own);
}

bool lr_prefetch_own_step(struct lr_engine *e)
{
	struct lr_claim *c = &e->claims[OWN_CLAIM];

	if (e->o.faults_only)
		return false;
	if (!c->t && !claim(e, c) && !steal(e, c))
		return false;
	if (!claim_step(e, c, NULL)) {
		pthread_mutex_lock(&e->lock);
		struct lr_claim whole = *c; /* as in worker() */
		lr_claim_release(e, c);
		pthread_mutex_unlock(&e->lock);
		if (whole.done == whole.end - whole.start && !whole.cancelled)
			lr_thp_claim_done(e, whole.t, whole.start, whole.img, whole.done);
	}
	return true;
}

int lr_prefetch_start(struct lr_engine *e)
{
	int ret = 0;

	pthread_mutex_lock(&e->lock); /* against lr_prefetch_stop() */
	for (unsigned i = 0; i < e->o.workers; i++) {
		/* following with two or more: the first on the fault thread's CPU, in its idle time */
		e->workers[i] =
		    (struct lr_worker){.e = e, .slot = i, .near = e->follow.on && i == 0 && e->o.workers > 1};
		if (pthread_create(&e->workers[i].th, NULL, worker, &e->workers[i])) {
			pr_err("can't start prefetch worker %u", i);
			lr_engine_fail_locked(e, "prefetch workers unavailable");
			ret = -1;
			break;
		}
		e->nr_workers = i + 1;
	}
	pthread_mutex_unlock(&e->lock);
	return ret;
}

void lr_prefetch_stop(struct lr_engine *e)
{
	pthread_mutex_lock(&e->lock);
	lr_stage_enter(e, STAGE_STOPPING);
	unsigned n = e->nr_workers;
	e->nr_workers = 0;
	for (unsigned i = 0; i < n; i++) /* a starved SCHED_IDLE worker would keep us waiting */
		sched_idle(&e->workers[i], __atomic_load_n(&e->workers[i].tid, __ATOMIC_SEQ_CST), false);
	pthread_cond_broadcast(&e->work);
	pthread_cond_broadcast(&e->calm);
	pthread_mutex_unlock(&e->lock);
	for (unsigned i = 0; i < n; i++)
		pthread_join(e->workers[i].th, NULL);
}

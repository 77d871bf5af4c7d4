/* SPDX-License-Identifier: MIT */
/* Engine internals shared by its files (not an interface). */
#ifndef LAZYRESTORE_ENGINE_INTERNAL_H
#define LAZYRESTORE_ENGINE_INTERNAL_H

#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <stdbool.h>

#include "plugin/engine/engine.h"
#include "plugin/engine/gate.h"
#include "plugin/engine/ranges.h"
#include "plugin/engine/thp.h"
#include "plugin/engine/ws.h"
#include "lib/uffd-compat.h"

#define PAGE		   IMG_PAGE_SIZE
#define FAULT_AROUND_START 16U
#define FAULT_AROUND_MAX   512U /* 2 MiB */
#define PREFETCH_CHUNK	   (2UL << 20)
/*
 * A prefetch UFFDIO_COPY runs inside the task's gate, so the fault thread may
 * wait for one of them per copier.  Steps start at PREFETCH_STEP_MIN, go back to
 * it whenever a fault was served since the last step, and grow while none
 * comes: a worker's double once PREFETCH_CALM_STEPS steps in a row saw none, the
 * fault thread's own by PREFETCH_STEP_MIN a step; up to the largest step
 * (--prefetch-step, or the page source's probe).
 */
#define PREFETCH_STEP_MIN (64UL << 10)
/*
 * A step is copied in pieces of PREFETCH_STEP_MIN; a worker's, while faults
 * come (until PREFETCH_CALM_STEPS steps in a row saw none), of
 * PREFETCH_PIECE_NEAR: a fault then waits at the gate behind a quarter of one.
 * After PREFETCH_CALM_NS with no fault served, pieces of PREFETCH_PIECE_CALM:
 * fewer calls per byte while nothing waits.
 */
#define PREFETCH_PIECE_NEAR (16UL << 10)
#define PREFETCH_PIECE_CALM (256UL << 10)
#define PREFETCH_CALM_STEPS 8
/* with opts.workers_calm: the spell without a fault served before a worker's step */
#define PREFETCH_CALM_NS   1000000ULL
#define MAX_WORKERS	   8
#define PREFETCH_NICE	   10
#define PREFETCH_NICE_AWAY 19	       /* following (follow.c): workers are SCHED_OTHER, off the program's CPU */
#define OWN_CLAIM	   MAX_WORKERS /* the fault thread's own prefetch claim */
#define NR_CLAIMS	   (MAX_WORKERS + 1)
/* how long after the marker a criu that stays (no -d) is taken as done with the tasks */
#define RESTORE_OVER_MS 200

/*
 * Where the engine is; one value instead of flags.  STAGE_FINISHED lasts until
 * restore_fd turns readable or RESTORE_OVER_MS after the marker (stats.t_finished).
 */
enum lr_stage {
	STAGE_HANDOFF,	/* tasks arrive, faults are served; no prefetch */
	STAGE_FINISHED, /* restore-finished marker: prefetch (criu still detaches from the tasks) */
	STAGE_OVER,	/* criu is done with the tasks (for the log and stats only) */
	STAGE_STOPPING, /* all resident or gone, or stopped: the threads wind down */
	STAGE_FAILED,	/* a fatal error; the tree was killed */
};

/*
 * Who writes what.  "lock" is lr_engine.lock; "fault thread" is the thread in
 * lr_engine_run(); a claim's "copier" is the worker owning its slot, or the
 * fault thread for OWN_CLAIM.  Reads under the lock see every write under it.
 *
 * lr_task
 *   uffd idx vpid src_pid real_pid  set by lr_task_new() under lock, then constant
 *   jpos                            fault thread only
 *   gone pending next_fault window  lock (any thread: a copier that meets ESRCH marks gone)
 *   gate                            its own atomics (gate.h)
 * lr_claim
 *   t start end img                 lock, by its copier (take_chunk, release_claim)
 *   data step faults calm           its copier only; buf: allocated at create, filled by its copier
 *   done                            its copier, atomic store inside the gate (a worker) or
 *                                   ungated (OWN_CLAIM); others load it atomically, and get
 *                                   its final value inside the task's gate read side
 *   cancelled                       lock, atomic store, any thread: the fault thread for an
 *                                   event or a steal also holds the task's gate read side,
 *                                   so a worker checking it inside the gate cannot miss it;
 *                                   lr_task_gone() sets it without the gate (a copy into a
 *                                   gone task fails with ESRCH anyway)
 * lr_engine
 *   tasks nr_tasks cap_tasks        lock
 *   src o epfd wakefd               constant after lr_engine_create(); restore_fd before run
 *   fault_buf ready have_ready      fault thread only; fault_seq last_fault_ns: fault
 *                                   thread, atomic
 *   calm_waiters                    lock (workers in wait_calm(); the fault thread wakes them)
 *   stage                           atomic, forward only (lr_stage_enter), any thread; moves
 *                                   that workers wait for (FINISHED, STOPPING, FAILED) are
 *                                   made under lock with a broadcast of work
 *   hint_task hint_addr rr          lock
 *   workers nr_workers              lock (prefetch start and stop)
 *   follow                          fault thread only; follow.cpu also atomic (workers read it)
 *   stats                           eexist bytes zero_pages prefetch_pages: atomic adds,
 *                                   any thread, no lock; gate_*: the fault thread only, no
 *                                   lock (read once it has stopped); everything else under lock
 */
struct lr_task {
	int uffd;
	unsigned idx;	  /* index in tasks[] and in the journal */
	uint64_t jpos;	  /* next journal entry */
	uint32_t vpid;	  /* 0 for a fork child */
	uint32_t src_pid; /* whose images hold its pages */
	pid_t real_pid;	  /* 0 if unknown */
	bool gone;
	struct lr_ranges pending; /* image data not installed and not claimed */
	/* The fault thread reads this uffd inside it, prefetch copies wait outside (gate.h). */
	struct lr_gate gate;
	uint64_t next_fault; /* end of the last fault-around window */
	unsigned window;     /* fault-around pages */
};

/* follow.c: where the fault thread runs (opts.follow) */
struct lr_follow {
	bool on;	       /* opts.follow, workers to prefetch, and more than one CPU */
	cpu_set_t all;	       /* the CPUs we may run on */
	int cpu;	       /* atomic: the CPU the fault thread is pinned to; -1: none yet */
	int fd;		       /* stat file of the thread looked at last, or -1 */
	pid_t pid, tid;	       /* whose */
	uint64_t next_look_ns; /* no look before this */
	uint64_t next_move_ns; /* no move before this */
	uint64_t moves;
};

/* A piece of a task's ranges taken by a prefetch worker. */
struct lr_claim {
	struct lr_task *t; /* NULL: slot free */
	uint64_t start, end, img;
	const void *data; /* its image data if the source maps (else NULL) */
	uint8_t *buf;	  /* the copier's buffer, for a source that copies */
	uint64_t buf_at;  /* buf holds the claim's bytes from buf_at on, buf_len of them */
	uint64_t buf_len; /* (a step read but not all copied: a fault came first) */
	uint64_t step;	  /* the next step's size */
	uint64_t faults;  /* e->fault_seq when the last step began */
	unsigned calm;	  /* steps in a row that began with no fault served since the one before */
	uint64_t done;	  /* bytes from start handled */
	bool cancelled;	  /* an event, a steal or the task's end took it back */
	bool ws;	  /* a run of the working set (ws.c): lr_ws_run_over() at its release */
};

struct lr_engine {
	pthread_mutex_t lock; /* see the table above */
	pthread_cond_t work;
	pthread_cond_t calm; /* workers waiting for a calm spell (opts.workers_calm) */
	unsigned calm_waiters;
	struct lr_task **tasks;
	size_t nr_tasks, cap_tasks;
	struct lr_claim claims[NR_CLAIMS];
	struct page_source *src;
	uint8_t *fault_buf;	/* the fault thread's buffer (FAULT_AROUND_MAX pages), for a source that copies */
	uint64_t fault_seq;	/* faults served so far (atomic; written by the fault thread) */
	uint64_t last_fault_ns; /* lr_now() of the latest fault served, in ns (atomic; fault thread) */
	struct lr_engine_opts o;
	int epfd, wakefd;
	struct epoll_event ready; /* what lr_fault_waiting() took from epfd, dispatched next */
	bool have_ready;
	int stage;		   /* enum lr_stage; only ever moves forward (lr_stage_enter) */
	int restore_fd;		   /* readable once the restore is over; -1: none */
	struct lr_task *hint_task; /* most recent fault, for prefetch order */
	uint64_t hint_addr;
	size_t rr; /* round-robin start for prefetch */
	struct lr_worker {
		struct lr_engine *e;
		unsigned slot; /* its claims[] entry */
		pthread_t th;
		pid_t tid;		 /* atomic: set by the worker when it starts; 0 before */
		struct lr_task *in_gate; /* atomic: the task whose gate it is in, or NULL */
		bool boosted;		 /* atomic: the fault thread took it out of SCHED_IDLE */
		bool near;		 /* following: pinned to the fault thread's CPU (follow.c); constant */
	} workers[MAX_WORKERS];
	unsigned nr_workers;
	struct lr_stats stats;
	struct lr_remote *remote; /* an asynchronous source's requests (remote.c), else NULL */
	struct lr_thp *thp;	  /* thp.c: its own lock; published once (atomic) under lock */
	struct lr_ws *ws;	  /* ws.c: set before the hand-off; its queue under lock, the rest fault thread */
	struct lr_follow follow;
};

/*
 * follow.c.  lr_follow_fault(): before serving a fault of t's thread tid (0:
 * unknown), move to its CPU if it ran elsewhere; lr_follow_worker(): a worker
 * starting; lr_follow_stop(): back on every CPU, before threads are started
 * that would inherit the pin.
 */
void lr_follow_start(struct lr_engine *e);
void lr_follow_fault(struct lr_engine *e, struct lr_task *t, uint32_t tid);
void lr_follow_worker(struct lr_engine *e, const struct lr_worker *w, pid_t tid);
void lr_follow_stop(struct lr_engine *e);

/* uffd operations (uffdops.c) */
enum { INSTALL_OK = 0, INSTALL_AGAIN = 1, INSTALL_GONE = 2, INSTALL_FATAL = -1 };
/*
 * Copy [dst, dst+len) from the image data at dump-time address img.
 * *done = bytes dealt with (installed, already there, or not registered any
 * more); on INSTALL_AGAIN the caller retries from dst + *done later.
 * lr_install = lr_source (find and map the data; a failure kills the tree)
 * + lr_copy (the UFFDIO_COPYs from it).
 */
int lr_install(struct lr_engine *e, struct lr_task *t, uint64_t dst, uint64_t img, uint64_t len, uint64_t *done,
	       uint64_t *installed, bool *first_existed);
/* The image data at img: in buf (which the caller owns) if the source copies, else in its mapping. */
int lr_source(struct lr_engine *e, struct lr_task *t, uint64_t dst, uint64_t img, uint64_t len, void *buf,
	      const void **data);
int lr_copy(struct lr_engine *e, struct lr_task *t, uint64_t dst, const void *data, uint64_t len, uint64_t *done,
	    uint64_t *installed, bool *first_existed);
/* lr_copy with UFFDIO_COPY's mode (UFFDIO_COPY_MODE_DONTWAKE: the caller wakes) */
int lr_copy_mode(struct lr_engine *e, struct lr_task *t, uint64_t dst, const void *data, uint64_t len, uint64_t mode,
		 uint64_t *done, uint64_t *installed, bool *first_existed);
int lr_zeropage(struct lr_engine *e, struct lr_task *t, uint64_t addr);
void lr_wake(struct lr_task *t, uint64_t addr, uint64_t len);

/* claims.c: tasks, claims, stage and failure, below the fault path and prefetch */
static inline int lr_stage(const struct lr_engine *e)
{
	return __atomic_load_n(&e->stage, __ATOMIC_ACQUIRE);
}
/* Move to stage s if not there or beyond yet; true if this call moved it. */
bool lr_stage_enter(struct lr_engine *e, int s);
/*
 * Fault thread: does a uffd (or the engine's wake-up) have something to read?
 * The event found is kept, not consumed: lr_take_ready() hands it to the next
 * dispatch (1, or 0 if none is kept).
 */
bool lr_fault_waiting(struct lr_engine *e);
int lr_take_ready(struct lr_engine *e, struct epoll_event *ev);
void lr_engine_kick(struct lr_engine *e);
void lr_engine_fail_locked(struct lr_engine *e, const char *why);
/* Lock held.  parent < -1: resumed task, already known to the supervisor. */
struct lr_task *lr_task_new(struct lr_engine *e, int uffd, uint32_t vpid, uint32_t src_pid, pid_t real_pid, int parent,
			    uint64_t fork_pos);
void lr_task_gone(struct lr_engine *e, struct lr_task *t); /* lock held */
/* Lock held: does a live task have pages not installed and not claimed? */
bool lr_pending_work(struct lr_engine *e);
/* Lock held: claim a chunk into slot c (near the latest fault), or return false when nothing is left. */
bool lr_claim_take(struct lr_engine *e, struct lr_claim *c);
/* Lock held: a claim not finished and not taken back goes back to pending; the slot is free. */
void lr_claim_release(struct lr_engine *e, struct lr_claim *c);
/* Lock held, inside t's gate read side: every claim overlapping [s,end) goes back to pending. */
int lr_claims_reclaim(struct lr_engine *e, struct lr_task *t, uint64_t s, uint64_t end);
/* Lock held: the child's ranges are the parent's plus its claimed remainders. */
int lr_fork_ranges(struct lr_engine *e, struct lr_task *parent, struct lr_task *child);

/* engine.c */
/* The restore is over (criu's pidfd, or the time bound): logged. */
void lr_engine_restore_over(struct lr_engine *e);

/* fault.c */
int lr_drain_uffd(struct lr_engine *e, struct lr_task *t);
/* Lock held: apply one event message (the FORK child comes from child). */
int lr_apply_event(struct lr_engine *e, struct lr_task *t, const struct uffd_msg *m, struct lr_task *child);

/* Fault thread, lock held: the fault-around window of t for a fault at addr. */
void lr_adapt_window(struct lr_task *t, uint64_t addr);
/* A fault served: counts, first-fault time, latency since t0. */
void lr_account_fault(struct lr_engine *e, uint64_t installed, double t0);

/*
 * remote.c: the engine over an asynchronous source (page_source_async).
 * create/detach: the engine's life; fault: serve_fault()'s work (a request,
 * or a wait for one in flight, or a zero page); pump: the background window;
 * reclaim/fork: as lr_claims_reclaim() and lr_fork_ranges() for claims;
 * busy: requests in flight.  No-ops without an asynchronous source.
 */
int lr_remote_create(struct lr_engine *e);
void lr_remote_detach(struct lr_engine *e);
int lr_remote_fault(struct lr_engine *e, struct lr_task *t, uint64_t addr, double t0);
bool lr_remote_pump(struct lr_engine *e);
int lr_remote_reclaim(struct lr_engine *e, struct lr_task *t, uint64_t s, uint64_t end);
int lr_remote_fork(struct lr_engine *e, struct lr_task *t, struct lr_task *child);
bool lr_remote_busy(struct lr_engine *e);
/*
 * Fault thread: faults waiting for the next bulk answer for longer than a
 * bound ask for their page again, urgently; ms until the next such bound, -1: none.
 */
int lr_remote_overdue(struct lr_engine *e);
/* An epoll tag of the fault thread's: true if it was remote.c's (its answers are then read). */
bool lr_remote_event(struct lr_engine *e, const void *tag);

/* prefetch.c */
int lr_prefetch_start(struct lr_engine *e);
/* Fault thread, between faults: one step of its own claim; false if there was nothing to do. */
bool lr_prefetch_own_step(struct lr_engine *e);
/* Lock held: ms until the workers waiting for a calm spell may go; wakes them once it came (-1). */
int lr_prefetch_calm_in(struct lr_engine *e);
/* PREFETCH_CALM_NS passed without a fault served */
bool lr_prefetch_calm(struct lr_engine *e);
void lr_prefetch_stop(struct lr_engine *e);
/* Fault thread: read t's uffd inside its gate, raising a worker that holds it up. */
void lr_prefetch_gate_read_lock(struct lr_engine *e, struct lr_task *t);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The fault engine: serves userfaultfd faults and events of every restored task
 * from a page source, prefetches the rest in the background after restore has
 * finished, and returns when every task is resident or gone.  Front ends (the
 * lazy-pages daemon, later a CRIU plugin) feed it tasks from their hand-off.
 */
#ifndef LAZYRESTORE_ENGINE_H
#define LAZYRESTORE_ENGINE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "images/image.h"
#include "plugin/engine/stats.h"
#include "plugin/source/source.h"
#include "plugin/supervisor/journal.h"

struct lr_engine;

struct lr_engine_opts {
	unsigned workers;	 /* prefetch threads besides the fault thread */
	bool faults_only;	 /* the fault thread does not prefetch between faults (workers 0: no prefetch) */
	bool workers_calm;	 /* workers start a step only after PREFETCH_CALM_NS with no fault served */
	const char *workers_why; /* what chose workers_calm, for the log and stats; may be NULL */
	bool follow;		 /* the fault thread runs on the faulting thread's CPU (follow.c) */
	const char *follow_why;	 /* what chose follow; may be NULL */
	uint64_t prefetch_step;	 /* bytes per prefetch UFFDIO_COPY; 0 = PREFETCH_STEP */
	bool progress;		 /* draw a progress line on stderr */
	/*
	 * Called for each new task (hand-off or UFFD_EVENT_FORK), in index order,
	 * before the engine acts on its uffd: the supervisor keeps a dup.
	 * parent is -1 or the forking task's index, fork_pos the journal entry
	 * of its FORK message.
	 */
	int (*new_task)(void *arg, unsigned idx, int uffd, uint32_t vpid, pid_t real_pid, int parent,
			uint64_t fork_pos);
	void *arg;
	struct lr_journal *journal; /* NULL: no journal (unsupervised) */
};

/* A task as the supervisor kept it, for lr_engine_resume(). */
struct lr_resume_task {
	int uffd;
	uint32_t vpid;
	pid_t real_pid;
	int parent;
	uint64_t fork_pos;
	const struct img_mm *mm; /* NULL for fork children */
};

/*
 * Whether workers may copy while the program faults on this host (cpuprobe.c):
 * false where a thread of ours runnable on a faulting thread's CPU makes its
 * faults much slower.  why says what was measured.
 */
bool lr_probe_workers_share(char *why, size_t len);
/*
 * Whether the fault thread should run on the faulting thread's CPU (follow.c,
 * cpuprobe.c): true where a fault served from there is much faster than one
 * served from another CPU.
 */
bool lr_probe_follow(char *why, size_t len);

struct lr_engine *lr_engine_create(struct page_source *src, const struct lr_engine_opts *o);
void lr_engine_destroy(struct lr_engine *e);

/*
 * A live task: its uffd, its images (mm must outlive the engine) and its pid
 * as seen from here (0 if unknown).  Thread-safe; may run while lr_engine_run().
 * The engine owns uffd from here on, also when this fails.
 */
int lr_engine_add_task(struct lr_engine *e, uint32_t vpid, pid_t real_pid, int uffd, const struct img_mm *mm);
/*
 * The restore-finished marker came: background prefetch starts, in the fault
 * thread between faults (as stock criu's one thread does) and in the workers,
 * which only ever use idle CPU time (SCHED_IDLE).
 */
void lr_engine_restore_finished(struct lr_engine *e);
/*
 * The restore is over when fd turns readable (a pidfd of `criu restore -d`),
 * or RESTORE_OVER_MS after the marker at the latest.  The engine owns fd.
 * Without a watched fd it is over at the marker.
 */
int lr_engine_watch_restore(struct lr_engine *e, int fd);
/* Stop everything and kill the restored tree; why is logged once. */
void lr_engine_fail(struct lr_engine *e, const char *why);

/*
 * After a crash of the previous engine: rebuild every task's ranges from the
 * images, replay the journal's events on them, wake every waiting thread.
 */
int lr_engine_resume(struct lr_engine *e, const struct lr_resume_task *t, size_t nr);

/* Fault loop in the caller's thread; 0 when all resident/gone, -1 on failure. */
int lr_engine_run(struct lr_engine *e);
const struct lr_stats *lr_engine_stats(const struct lr_engine *e);

#endif

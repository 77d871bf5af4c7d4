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

struct lr_engine;

struct lr_engine_opts {
	unsigned workers; /* prefetch threads; 0 = none (faults only) */
	bool progress;	  /* draw a progress line on stderr */
	/*
	 * Called from the fault thread for each uffd that UFFD_EVENT_FORK hands
	 * us, before the engine acts on it (the supervisor keeps a dup).
	 */
	int (*new_uffd)(void *arg, int uffd, uint32_t src_pid);
	void *arg;
};

struct lr_engine *lr_engine_create(struct page_source *src, const struct lr_engine_opts *o);
void lr_engine_destroy(struct lr_engine *e);

/*
 * A live task: its uffd, its images (mm must outlive the engine) and its pid
 * as seen from here (0 if unknown).  Thread-safe; may run while lr_engine_run().
 */
int lr_engine_add_task(struct lr_engine *e, uint32_t vpid, pid_t real_pid, int uffd, const struct img_mm *mm);
/* The restore-finished marker came: background prefetch may start. */
void lr_engine_restore_finished(struct lr_engine *e);
/* Stop everything and kill the restored tree; why is logged once. */
void lr_engine_fail(struct lr_engine *e, const char *why);

/* Fault loop in the caller's thread; 0 when all resident/gone, -1 on failure. */
int lr_engine_run(struct lr_engine *e);
const struct lr_stats *lr_engine_stats(const struct lr_engine *e);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * Working-set replay (images/ws.h has the file).  With recording on, the
 * fault thread notes the dump-time address of every faulting page of a
 * hand-off task, in order (while the prefetch waits: lr_ws_setup()); at the
 * end the list is written next to the images.  A later restore that finds
 * a file made for this very dump hands each task's list to the copiers
 * first (lr_ws_take(), before any other prefetch claim), in runs: batches of
 * WS_BATCH recorded pages sorted and merged where a few pending pages lie
 * between them.  A run is an ordinary claim, so a fault is served by the
 * fault thread at once, never after the replay's copies (a replay on the
 * fault thread held each fault behind a batch: bench/apps/README.md), and
 * events reclaim a run as any other.
 */
#ifndef LAZYRESTORE_ENGINE_WS_H
#define LAZYRESTORE_ENGINE_WS_H

#include <stdbool.h>
#include <stdint.h>

#include "images/image.h"

struct img_ws;
struct lr_engine;
struct lr_range;
struct lr_task;

/*
 * Before the hand-off: read DIR's working-set file (a stale, foreign or bad
 * one is ignored with a warning) or, with record, note first faults for
 * lr_ws_save() instead.  Recording with hold_s, the prefetch waits hold_s
 * seconds after the restore-finished marker, so that every page the tree
 * touches first in that time faults (and is noted); recording ends then.
 * Beside the prefetch (hold_s 0), only the pages it did not reach first
 * would be noted: a replay of that list leaves the rest to fault.  dir must
 * outlive the engine.  -1 only if recording is impossible (the dump's
 * identity unreadable).
 */
int lr_ws_setup(struct lr_engine *e, struct img_dir *dir, bool record, unsigned hold_s);
/* Whether a working set is replayed (one was read, and this is no recording). */
bool lr_ws_replays(const struct lr_engine *e);
/*
 * Before the hand-off, lr_ws_replays(): the tasks are held after the
 * restore-finished marker (criu-patches/0014) until the working set is in,
 * max_ms after the marker, or the engine stops, whichever comes first; then
 * release(arg) is called once, engine lock held.  Pages installed before the
 * program runs go into page tables it does not use yet: on a PVM guest a
 * replay beside the running program held it up (bench/apps/README.md).
 */
void lr_ws_hold_tasks(struct lr_engine *e, unsigned max_ms, void (*release)(void *), void *arg);
/* Engine lock held: ms until held tasks are released anyway; -1 if none are held, or before the marker. */
int lr_ws_release_in(struct lr_engine *e);
/* Engine lock held: release held tasks now (if any), why for the log. */
void lr_ws_release(struct lr_engine *e, const char *why);
/* Before the hand-off: install file's lists (the engine owns them from now), as a working set read from a dump's. */
int lr_ws_use(struct lr_engine *e, struct img_ws *file);
/*
 * Engine lock held: whether the prefetch waits for a recording window: ms
 * left, -1 before the marker, 0 if not (any more); the call that finds the
 * window passed wakes the workers.
 */
int lr_ws_hold_in(struct lr_engine *e);
/* Engine lock held: a hand-off task; its working set is installed at the fault thread's next turn. */
void lr_ws_task_added(struct lr_engine *e, struct lr_task *t);
/* Fault thread: a fault on the page whose dump-time address is img. */
void lr_ws_note(struct lr_engine *e, struct lr_task *t, uint64_t img);
/*
 * Engine lock held, from the restore-finished marker on (before it, criu's
 * restorer still moves VMAs into place): the next run of the working set,
 * taken out of its task's pending ranges, at its dump-time address; false
 * when no working set is left to install.
 */
bool lr_ws_take(struct lr_engine *e, struct lr_task **t, struct lr_range *out);
/*
 * Engine lock held, all resident: the replay ends.  Where runs wait for calm
 * spells (lr_claim_take()), the prefetch may have installed the rest of the
 * set before any run was taken.
 */
void lr_ws_close(struct lr_engine *e);
/* Engine lock held: a run lr_ws_take() gave is over (installed, taken back or failed). */
void lr_ws_run_over(struct lr_engine *e);
/* After the run: write the recorded working set (if recording). */
int lr_ws_save(struct lr_engine *e);
void lr_ws_free(struct lr_engine *e);

#endif

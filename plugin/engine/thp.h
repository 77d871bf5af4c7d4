/* SPDX-License-Identifier: MIT */
/*
 * Huge pages back after a lazy restore.  UFFDIO_COPY installs 4 KiB pages, so
 * a range that was THP-eligible at dump time (MADV_HUGEPAGE in the VMA's madv
 * bits, or THP "always" without MADV_NOHUGEPAGE) comes back as small pages.
 * Once every page of a 2 MiB-aligned extent of such a VMA is installed, the
 * extent is collapsed with process_madvise(pidfd, MADV_COLLAPSE).  A
 * uffd-armed VMA collapses only with no empty PTE in the extent
 * (hpage_collapse_scan_pmd() in mm/khugepaged.c counts none PTEs only when
 * !userfaultfd_armed()), so a partly installed extent is refused with EBUSY
 * and is never attempted.  Collapse copies the pages: the bytes stay the same.
 */
#ifndef LAZYRESTORE_ENGINE_THP_H
#define LAZYRESTORE_ENGINE_THP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "images/image.h"

struct lr_engine;
struct lr_task;

/* The system's transparent huge page mode (sysfs "enabled"). */
enum lr_thp_mode { LR_THP_UNKNOWN, LR_THP_NEVER, LR_THP_MADVISE, LR_THP_ALWAYS };
enum lr_thp_mode lr_thp_mode(void);
/* AnonHugePages of process pid (smaps_rollup), kB; -1 if unknown. */
long lr_anon_huge_kib(pid_t pid);

/* Engine lock held: a task from the hand-off (or resumed) with its images. */
void lr_thp_add_task(struct lr_engine *e, struct lr_task *t, const struct img_mm *mm);
/*
 * No lock held: a prefetch claim [start, start+len) (image address img) is
 * installed; its whole extents are collapsed by the sweep, after the prefetch.
 * Not sooner: a collapse write-locks the program's mmap and VMA while it copies
 * the extent, and every fault and prefetch copy into that VMA waits for it
 * (bench/apps/README.md has the figures).
 */
void lr_thp_claim_done(struct lr_engine *e, struct lr_task *t, uint64_t start, uint64_t img, uint64_t len);
/*
 * Fault thread, all resident and the workers stopped: collapse the extents
 * (the claims handed over, then every eligible one left), record AnonHugePages
 * per task.  True: a thread of its own does it, and the fault thread serves
 * faults and events until lr_thp_sweep_done(), then calls lr_thp_sweep_join().
 * False: nothing to do, or done already (remote source, or no thread: the
 * calling thread did it, serving local faults between two calls).
 */
bool lr_thp_sweep_start(struct lr_engine *e);
/* The sweep thread is done (it kicks the engine's wake-up when it is). */
bool lr_thp_sweep_done(struct lr_engine *e);
void lr_thp_sweep_join(struct lr_engine *e);
void lr_thp_free(struct lr_engine *e);

#endif

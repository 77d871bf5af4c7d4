/* SPDX-License-Identifier: MIT */
/* Page server counters and a log-scale fault latency histogram. */
#ifndef LAZYRESTORE_STATS_H
#define LAZYRESTORE_STATS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* 4 bits of sub-bucket precision per power of two: <= 6% error on percentiles. */
#define LR_HIST_SUB	   16
#define LR_HIST_BUCKETS	   (64 * LR_HIST_SUB)
#define LR_STATS_THP_TASKS 16 /* tasks whose AnonHugePages the stats list */

struct lr_stats {
	uint64_t faults;	     /* fault messages served */
	uint64_t fault_pages;	     /* pages installed for the faulting address itself */
	uint64_t fault_around_pages; /* extra pages installed with a fault */
	uint64_t prefetch_pages;     /* pages installed by background prefetch */
	uint64_t zero_pages;	     /* UFFDIO_ZEROPAGE installs */
	uint64_t eexist;	     /* installs that found the page already there */
	uint64_t bytes;		     /* bytes copied from the source */
	uint64_t forks, remaps, removes, unmaps, tasks_gone;
	uint64_t total_pages;				  /* lazy data pages at hand-off */
	double t_start;					  /* monotonic seconds: restore connected */
	double t_first_fault, t_finished, t_all_resident; /* 0 = not yet */
	uint64_t hist[LR_HIST_BUCKETS];			  /* fault service latency, ns */
	uint64_t lat_max_ns;
	/* uffd reads, and those that waited at the gate for a worker's copy in flight (fault thread) */
	uint64_t gate_reads, gate_waits, gate_wait_ns, gate_wait_max_ns;
	char source[8];	       /* how pages were copied: "mmap" or "pread" */
	char source_why[200];  /* the probe's figures, or the option that chose */
	bool workers_calm;     /* workers waited for a calm spell (opts.workers_calm) */
	char workers_why[200]; /* the sibling probe's figures, or the option that chose */
	uint64_t step_max;     /* largest background step, bytes */
	bool follow;	       /* the fault thread followed the faulting threads' CPUs (opts.follow) */
	char follow_why[256];  /* the probe's figures, or the option that chose */
	uint64_t fault_thread_moves;
	int fault_thread_cpu; /* the CPU it followed last; -1: none */
	/* huge pages (thp.c): 2 MiB extents of THP-eligible lazy VMAs, collapses, AnonHugePages after */
	uint64_t thp_extents, thp_collapsed, thp_failed, thp_collapse_ns;
	/*
	 * working set (ws.c): recorded pages installed by the replay, not pending any more, recorded;
	 * pages between them installed with them; longest replay
	 */
	uint64_t ws_pages, ws_skipped, ws_recorded, ws_gap_pages;
	double ws_ms;
	unsigned thp_nr;
	struct {
		uint32_t pid; /* dump-time pid */
		long kib;     /* AnonHugePages once all was resident; -1: unknown */
	} thp_task[LR_STATS_THP_TASKS];
};

double lr_now(void);	  /* CLOCK_MONOTONIC, seconds */
uint64_t lr_now_ns(void); /* the same, nanoseconds */
void lr_stats_latency(struct lr_stats *s, uint64_t ns);
/* Latency (µs) at percentile p (0..100). */
double lr_stats_percentile(const struct lr_stats *s, double p);
int lr_stats_write_json(const struct lr_stats *s, const char *path);
void lr_stats_log_summary(const struct lr_stats *s);

#endif

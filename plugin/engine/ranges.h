/* SPDX-License-Identifier: MIT */
/*
 * Per-task lazy ranges: the pages of lazy VMAs whose image data has not been
 * installed yet.  A page in no range of a lazy VMA reads as zero (never dumped,
 * already installed, or dropped by REMOVE/UNMAP).  Ranges never cross a
 * dump-time VMA edge, so one UFFDIO_COPY can cover any piece of one range.
 * Not thread-safe: the engine serializes access.
 */
#ifndef LAZYRESTORE_RANGES_H
#define LAZYRESTORE_RANGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "images/image.h"

struct lr_range {
	uint64_t start, end; /* run-time addresses, page-aligned, start < end */
	uint64_t img;	     /* dump-time address of start (follows REMAP events) */
};

/*
 * Sorted, non-overlapping ranges in blocks of up to LR_RBLOCK: a split in the
 * middle (every installed run of a working set, or fault window) moves at most
 * one block's tail, not the whole array's, under the engine lock
 * (bench/apps/README.md has the profile).
 */
#define LR_RBLOCK 64

struct lr_rblock {
	size_t n;
	struct lr_range v[LR_RBLOCK];
};

struct lr_ranges {
	struct lr_rblock **b; /* in address order, none empty */
	size_t nb, capb;
	size_t nr;	/* ranges in all */
	uint64_t pages; /* sum of all range lengths in pages */
};

void lr_ranges_init(struct lr_ranges *r);
void lr_ranges_free(struct lr_ranges *r);

/* Build from a task's images: every PE_LAZY page, cut at VMA edges. */
int lr_ranges_build(struct lr_ranges *r, const struct img_mm *mm, char *err, size_t errlen);
/*
 * The same; remote: the pages come from a page server, so a lazy entry
 * without data in the local pages file (criu dump --lazy-pages) is served too.
 */
int lr_ranges_build_for(struct lr_ranges *r, const struct img_mm *mm, bool remote, char *err, size_t errlen);

/* Insert [start,end) with dump-time address img; must not overlap. */
int lr_ranges_add(struct lr_ranges *r, uint64_t start, uint64_t end, uint64_t img);

/* The range holding addr, or NULL; valid until r changes. */
const struct lr_range *lr_ranges_get(const struct lr_ranges *r, uint64_t addr);
/* The lowest range, or NULL when r is empty. */
const struct lr_range *lr_ranges_first(const struct lr_ranges *r);
/* The k-th range in address order (k < nr): a walk over the blocks. */
const struct lr_range *lr_ranges_nth(const struct lr_ranges *r, size_t k);
/* Whether any range overlaps [start,end). */
bool lr_ranges_overlap(const struct lr_ranges *r, uint64_t start, uint64_t end);

/* Forget [start,end) (REMOVE/UNMAP, or installed). */
int lr_ranges_drop(struct lr_ranges *r, uint64_t start, uint64_t end);

/* Pages in [from, from+len) moved to to (UFFD_EVENT_REMAP). */
int lr_ranges_remap(struct lr_ranges *r, uint64_t from, uint64_t to, uint64_t len);

/* dst = copy of src (UFFD_EVENT_FORK); dst must be empty. */
int lr_ranges_copy(struct lr_ranges *dst, const struct lr_ranges *src);

/* Append all of src into dst (merging lists); ranges must not overlap. */
int lr_ranges_merge(struct lr_ranges *dst, const struct lr_ranges *src);

/*
 * A prefetch chunk of at most chunk bytes: from the chunk-aligned block holding
 * hint (or the first range after it, wrapping around), clipped to one range.
 * Returns 0 and fills *out, or -1 when r is empty.
 */
int lr_ranges_pick(const struct lr_ranges *r, uint64_t hint, uint64_t chunk, struct lr_range *out);

#endif

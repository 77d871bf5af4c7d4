/* SPDX-License-Identifier: MIT */
/*
 * libuserfault: the 2013 MADV_USERFAULT / remap_anon_pages() interface,
 * implemented over userfaultfd on a current kernel.
 *
 *   uf_madvise_userfault(addr, len)   touching a missing page of the range
 *                                     raises SIGBUS with si_addr = the address
 *   uf_remap_anon_pages(dst, src, len) move filled pages into such a range,
 *                                     atomically (UFFDIO_MOVE)
 *   uf_handler_thread(...)            the same range semantics served by a
 *                                     thread that calls a fill callback
 *
 * All calls return 0 (or a handle) on success and -1 (or NULL) with errno set
 * on failure; uf_last_error() describes the last failure of the calling
 * thread (which call, which address, why).
 *
 * Rules of the interface:
 * - Only private anonymous memory (mmap MAP_PRIVATE|MAP_ANONYMOUS, the heap)
 *   can be registered; anything else is EINVAL, an unmapped hole ENOMEM.
 * - Register BEFORE the range is touched: a page already present (or
 *   swapped) would never fault, so registration refuses it with EBUSY.
 * - Registered ranges are marked MADV_DONTFORK: a child of fork() does not
 *   inherit the userfault arming, so it must not see the range at all
 *   rather than read zeros where pages are missing.
 * - uf_remap_anon_pages() and uf_last_error() are async-signal-safe and
 *   meant to be called from the SIGBUS handler; the other calls are not.
 */
#ifndef LAZYRESTORE_USERFAULT_H
#define LAZYRESTORE_USERFAULT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Arm [addr, addr+len) (page-aligned, len > 0) so that a touch of a missing
 * page raises SIGBUS (si_code BUS_ADRERR, si_addr the faulting address).
 * Errors: EINVAL (unaligned, not private anonymous), ENOMEM (hole),
 * EBUSY (a page is already present or swapped, or the range is armed on
 * another userfaultfd, e.g. by uf_handler_thread()).
 */
int uf_madvise_userfault(void *addr, size_t len);

/*
 * Disarm a range again; missing pages then fill with zeros on touch, as in
 * ordinary anonymous memory.
 */
int uf_madvise_nouserfault(void *addr, size_t len);

/*
 * Move the pages of [src, src+len) to [dst, dst+len) without copying.
 * dst must lie in a range armed by uf_madvise_userfault().  All or nothing
 * with respect to the rules below (they are checked before anything moves):
 *   EINVAL  dst, src or len not page-aligned, len 0, dst not armed, or the
 *           two mappings differ in protection / mlock
 *   EEXIST  a page of dst is already present
 *   ENOENT  a page of src is missing
 * Afterwards src reads as missing.  A 2 MiB-aligned range of transparent
 * huge pages moves as whole huge pages, without being split, if dst may hold
 * THPs (MADV_HUGEPAGE where THP is in madvise mode); else the kernel splits.
 */
int uf_remap_anon_pages(void *dst, void *src, size_t len);

/*
 * Thread mode, for handlers that cannot run in a signal handler (they take
 * locks, allocate, do I/O).  The range is registered on a private
 * userfaultfd without the SIGBUS feature (same rules and errors as
 * uf_madvise_userfault); a thread reads its fault messages and calls
 * fill(page, buf, arg) for the page-aligned faulting address.  fill returns
 * the bytes of the page (page_size bytes: either buf, which it filled, or
 * memory of its own, copied from without an intermediate copy) or NULL with
 * errno set when the page cannot be had.  Such a page is poisoned, so the
 * thread touching it gets SIGBUS rather than wrong bytes, and the reason is
 * printed on stderr.  fill runs on the handler thread only, one call at a
 * time.
 */
typedef const void *(*uf_fill_fn)(void *page, void *buf, void *arg);

struct uf_handler;

struct uf_handler_stats {
	unsigned long faults;	/* fault messages read */
	unsigned long copies;	/* pages installed with UFFDIO_COPY */
	unsigned long raced;	/* page was already there (EEXIST): woken */
	unsigned long poisoned; /* fill or copy failed: page poisoned */
};

struct uf_handler *uf_handler_thread(void *addr, size_t len, uf_fill_fn fill, void *arg);

/*
 * Stop the thread and release the range.  Pages that were never filled are
 * poisoned first (a later touch raises SIGBUS, never reads zeros).  stats may
 * be NULL.  Frees h.
 */
int uf_handler_stop(struct uf_handler *h, struct uf_handler_stats *stats);

/* The last failure of this thread, e.g. "uf_remap_anon_pages: dst page
 * 0x7f..000 is present (EEXIST)".  Valid until the thread's next call. */
const char *uf_last_error(void);

#ifdef __cplusplus
}
#endif

#endif

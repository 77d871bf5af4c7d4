// SPDX-License-Identifier: MIT
/*
 * Which pages are there: /proc/self/pagemap, one u64 per page, bit 63
 * present, bit 62 swapped.  Read through an fd opened once, with pread, so
 * the SIGBUS path needs no allocation and no lock.
 */
#include <errno.h>
#include <unistd.h>

#include "lib/userfault/internal.h"

#define PM_PRESENT (1ULL << 63)
#define PM_SWAPPED (1ULL << 62)
#define PM_BATCH   256 /* entries per pread: 2 KiB of stack, fine on a sigaltstack */

extern int uf_pagemap_fd;

static ssize_t read_entries(uint64_t *ent, uintptr_t page, size_t n)
{
	size_t want = n * sizeof(*ent);
	ssize_t r;

	do {
		r = pread(uf_pagemap_fd, ent, want, (off_t)(page / uf_page_size * sizeof(*ent)));
	} while (r < 0 && errno == EINTR);
	if (r < 0)
		return -1;
	if ((size_t)r < sizeof(*ent)) {
		errno = EIO; /* pagemap ends only past the address space */
		return -1;
	}
	return r / (ssize_t)sizeof(*ent);
}

ssize_t uf_run_length(const void *addr, size_t len, bool mapped)
{
	uintptr_t start = (uintptr_t)addr, page = start, end = start + len;
	uint64_t ent[PM_BATCH];

	while (page < end) {
		size_t n = (end - page) / uf_page_size;
		ssize_t got, i;

		if (n > PM_BATCH)
			n = PM_BATCH;
		got = read_entries(ent, page, n);
		if (got < 0)
			return -1;
		for (i = 0; i < got; i++, page += uf_page_size)
			if (!!(ent[i] & (PM_PRESENT | PM_SWAPPED)) != mapped)
				return (ssize_t)(page - start);
	}
	return (ssize_t)len;
}

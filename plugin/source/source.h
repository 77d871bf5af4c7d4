/* SPDX-License-Identifier: MIT */
/*
 * Where page bytes come from.  The engine asks for "nr pages at dump-time vaddr
 * of task pid" and gets a pointer it can hand straight to UFFDIO_COPY.  The
 * local-image source maps pages-*.img; a TCP source (CRIU's page-server
 * protocol) would return its receive buffer.
 */
#ifndef LAZYRESTORE_SOURCE_H
#define LAZYRESTORE_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "images/image.h"

struct page_source;

struct page_source_ops {
	/*
	 * *data = nr_pages pages of task pid starting at dump-time vaddr, valid
	 * until destroy.  Returns 0, or -1 with err naming file, offset and problem.
	 */
	int (*get)(struct page_source *s, uint32_t pid, uint64_t vaddr, uint64_t nr_pages, const void **data, char *err,
		   size_t errlen);
	void (*destroy)(struct page_source *s);
};

struct page_source {
	const struct page_source_ops *ops;
};

static inline int page_source_get(struct page_source *s, uint32_t pid, uint64_t vaddr, uint64_t nr_pages,
				  const void **data, char *err, size_t errlen)
{
	return s->ops->get(s, pid, vaddr, nr_pages, data, err, errlen);
}

static inline void page_source_destroy(struct page_source *s)
{
	if (s)
		s->ops->destroy(s);
}

/* Local images: mm[i] (owned by the caller, must outlive the source) per task. */
struct page_source *file_source_open(struct img_dir *d, const struct img_mm *mms, size_t nr, struct img_err *err);

#endif

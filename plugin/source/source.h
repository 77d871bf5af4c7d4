/* SPDX-License-Identifier: MIT */
/*
 * Where page bytes come from.  The engine asks for "nr pages at dump-time vaddr
 * of task pid" and gets a pointer it hands to UFFDIO_COPY: either into the
 * source's own mapping (get) or into the caller's buffer, which read() filled.
 * Which of the two a source does is its `copies` flag; page_source_fetch()
 * hides the difference.  Every thread that copies passes its own buffer.
 */
#ifndef LAZYRESTORE_SOURCE_H
#define LAZYRESTORE_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "images/image.h"

struct page_source;
struct page_source_req;

/*
 * Called once per request, on the source's own thread, with r->status set:
 * it must not block (every completion behind it waits) and may submit again.
 */
typedef void (*page_source_done_fn)(struct page_source_req *r);

/*
 * One asynchronous fetch (a network source): the caller fills the first
 * block, keeps r and r->buf untouched until done(r) runs, and may have many
 * in flight; they complete in any order.
 */
struct page_source_req {
	uint32_t pid;	   /* whose images hold the pages */
	uint64_t vaddr;	   /* dump-time address, page-aligned */
	uint64_t nr_pages; /* >= 1 */
	void *buf;	   /* nr_pages * IMG_PAGE_SIZE bytes */
	bool urgent;	   /* a fault: sent ahead of every background request */
	page_source_done_fn done;
	void *arg; /* the caller's */
	/* at done: 0 and buf holds the pages, or -1 and err names peer, task, page and why */
	int status;
	char err[256];
};

struct page_source_ops {
	/*
	 * *data = nr_pages pages of task pid starting at dump-time vaddr, valid
	 * until destroy.  Returns 0, or -1 with err naming file, offset and problem.
	 * NULL for a source that can only read().
	 */
	int (*get)(struct page_source *s, uint32_t pid, uint64_t vaddr, uint64_t nr_pages, const void **data, char *err,
		   size_t errlen);
	/* The same pages copied into buf (nr_pages * IMG_PAGE_SIZE bytes); thread-safe. */
	int (*read)(struct page_source *s, uint32_t pid, uint64_t vaddr, uint64_t nr_pages, void *buf, char *err,
		    size_t errlen);
	/*
	 * Asynchronous sources only (NULL otherwise): queue r, never blocking on
	 * I/O; 0, or -1 with err when r cannot even be queued (then done is not
	 * called).  read() stays available on such a source (submit and wait).
	 */
	int (*submit)(struct page_source *s, struct page_source_req *r, char *err, size_t errlen);
	/* Optional: background requests should go on near (pid, vaddr), the latest fault. */
	void (*hint)(struct page_source *s, uint32_t pid, uint64_t vaddr);
	/*
	 * Optional, with submit: an fd for the submitter of urgent requests to
	 * watch (readable: call poll()), -1 while there is none; *gen changes
	 * whenever the fd is a new one.  poll() runs done() for the urgent
	 * answers that came, on the calling thread.  While there is none, all
	 * requests are answered in the order submitted (urgent ones first among
	 * those not yet sent): a fault's answer comes after every one in flight.
	 */
	int (*poll_fd)(struct page_source *s, unsigned *gen);
	void (*poll)(struct page_source *s);
	void (*destroy)(struct page_source *s);
};

/* How pages leave a source, as chosen at run time (file_source_probe). */
enum page_source_kind { PAGE_SOURCE_AUTO, PAGE_SOURCE_MAP, PAGE_SOURCE_READ, PAGE_SOURCE_NET };

struct page_source_choice {
	enum page_source_kind kind; /* MAP or READ once chosen */
	uint64_t step;		    /* the largest background UFFDIO_COPY step worth making, bytes */
	char why[200];		    /* one line: the probe's figures or the option that chose */
};

struct page_source {
	const struct page_source_ops *ops;
	bool copies;			  /* read() into the caller's buffer, else get() */
	struct page_source_choice choice; /* for the log and the stats */
};

static inline int page_source_fetch(struct page_source *s, uint32_t pid, uint64_t vaddr, uint64_t nr_pages, void *buf,
				    const void **data, char *err, size_t errlen)
{
	if (s->copies) {
		*data = buf;
		return s->ops->read(s, pid, vaddr, nr_pages, buf, err, errlen);
	}
	return s->ops->get(s, pid, vaddr, nr_pages, data, err, errlen);
}

static inline bool page_source_async(const struct page_source *s)
{
	return s->ops->submit != NULL;
}

static inline void page_source_destroy(struct page_source *s)
{
	if (s)
		s->ops->destroy(s);
}

const char *page_source_kind_name(enum page_source_kind k);

/*
 * Local images: mm[i] (owned by the caller, must outlive the source) per task,
 * served the way choice says (kind MAP or READ).
 */
struct page_source *file_source_open(struct img_dir *d, const struct img_mm *mms, size_t nr,
				     const struct page_source_choice *choice, struct img_err *err);

/*
 * Decide how this host copies best: a few milliseconds of UFFDIO_COPY into a
 * userfaultfd region of our own, from the mapping of the largest pages file and
 * through a pread buffer, each at a small and a large step, alternating.  want
 * AUTO probes; MAP or READ is taken as given (want from the command line).
 * Never fails: without a userfaultfd the choice is READ, and why says so.
 */
void file_source_probe(struct img_dir *d, const struct img_mm *mms, size_t nr, enum page_source_kind want,
		       struct page_source_choice *out);

#endif

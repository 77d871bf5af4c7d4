// SPDX-License-Identifier: MIT
/* Validation of page-server requests from an untrusted peer. */
#include <stdio.h>

#include "images/image.h"
#include "plugin/pageserver/protocol.h"

int ps_check_request(const struct ps_iov *iov, char *err, size_t errlen)
{
	uint32_t cmd = iov->cmd & PS_CMD_MASK, flags = iov->cmd >> PS_FLAGS_SHIFT;

	switch (cmd) {
	case PS_IOV_CLOSE:
	case PS_IOV_FORCE_CLOSE:
		/* CRIU's serve loop compares the whole word: flags must be 0 */
		if (flags)
			break;
		return cmd == PS_IOV_CLOSE ? PS_REQ_CLOSE : PS_REQ_FORCE_CLOSE;
	case PS_IOV_GET:
		if (flags) {
			snprintf(err, errlen, "PS_IOV_GET with flags %#x (a GET carries none)", flags);
			return -1;
		}
		if (iov->nr_pages == 0 || iov->nr_pages > PS_MAX_GET_PAGES) {
			snprintf(err, errlen, "PS_IOV_GET of %u pages (want 1..%u)", iov->nr_pages, PS_MAX_GET_PAGES);
			return -1;
		}
		if (iov->vaddr & (IMG_PAGE_SIZE - 1)) {
			snprintf(err, errlen, "PS_IOV_GET at unaligned address %#llx", (unsigned long long)iov->vaddr);
			return -1;
		}
		if (iov->dst_id == 0 || iov->dst_id > INT32_MAX) {
			snprintf(err, errlen, "PS_IOV_GET for pid %llu (not a pid)", (unsigned long long)iov->dst_id);
			return -1;
		}
		return PS_REQ_GET;
	}
	snprintf(err, errlen, "command %#x is not one a lazy page server serves (GET %#x, CLOSE %#x)", iov->cmd,
		 PS_IOV_GET, PS_IOV_CLOSE);
	return -1;
}

static const struct ps_image *find_image(const struct ps_image *imgs, size_t nr, uint64_t pid)
{
	for (size_t i = 0; i < nr; i++)
		if (imgs[i].pid == pid)
			return &imgs[i];
	return NULL;
}

int ps_answer_get(const struct ps_image *imgs, size_t nr, const struct ps_iov *req, struct ps_iov *reply,
		  const uint8_t **data, const struct ps_image **from, char *err, size_t errlen)
{
	const struct ps_image *im = find_image(imgs, nr, req->dst_id);
	struct img_page_run run;
	uint64_t n, off;

	if (!im) {
		snprintf(err, errlen, "PS_IOV_GET for pid %llu, which is no live task of the dump",
			 (unsigned long long)req->dst_id);
		return -1;
	}
	if (img_lookup(im->mm, req->vaddr, &run)) {
		snprintf(err, errlen, "PS_IOV_GET of pid %u page %#llx, which the dump does not hold", im->pid,
			 (unsigned long long)req->vaddr);
		return -1;
	}
	n = run.pages;
	if (n > req->nr_pages)
		n = req->nr_pages;
	if (n > PS_MAX_REPLY_PAGES)
		n = PS_MAX_REPLY_PAGES;
	off = run.off;
	if (off > im->pages_size || im->pages_size - off < IMG_PAGE_SIZE) {
		snprintf(err, errlen, "pid %u page %#llx: pages-%u.img is shorter than its pagemap", im->pid,
			 (unsigned long long)req->vaddr, im->mm->pages_id);
		return -1;
	}
	/* A pages file cut short after img_read_mm checked it: answer the pages it still holds. */
	if (n > (im->pages_size - off) >> IMG_PAGE_SHIFT)
		n = (im->pages_size - off) >> IMG_PAGE_SHIFT;
	*reply = *req;
	reply->cmd = PS_IOV_ADD_F | (PS_PE_PRESENT << PS_FLAGS_SHIFT);
	reply->nr_pages = (uint32_t)n;
	*data = im->pages + off;
	if (from)
		*from = im;
	return 0;
}

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

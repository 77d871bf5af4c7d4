// SPDX-License-Identifier: MIT
/* The page-server header codec (see wire.h). */
#include <stdio.h>
#include <string.h>

#include "plugin/transport/wire.h"

_Static_assert(sizeof(struct ps_iov) == 24, "CRIU 4.1.1's header is 24 bytes");

struct ps_iov32 {
	uint32_t cmd;
	uint32_t pad;
	uint64_t nr_pages;
	uint64_t vaddr;
	uint64_t dst_id;
};
_Static_assert(sizeof(struct ps_iov32) == 32, "the widened header is 32 bytes");

size_t ps_hdr_encode(enum ps_wire w, const struct ps_iov *h, void *buf)
{
	if (w == PS_WIRE_32) {
		struct ps_iov32 x = {.cmd = h->cmd, .nr_pages = h->nr_pages, .vaddr = h->vaddr, .dst_id = h->dst_id};

		memcpy(buf, &x, sizeof(x));
		return sizeof(x);
	}
	memcpy(buf, h, sizeof(*h));
	return sizeof(*h);
}

int ps_hdr_decode(enum ps_wire w, const void *buf, struct ps_iov *h, char *err, size_t errlen)
{
	struct ps_iov32 x;

	if (w != PS_WIRE_32) {
		memcpy(h, buf, sizeof(*h));
		return 0;
	}
	memcpy(&x, buf, sizeof(x));
	if (x.pad) {
		snprintf(err, errlen, "32-byte header with padding %#x (want 0)", x.pad);
		return -1;
	}
	if (x.nr_pages > UINT32_MAX) {
		snprintf(err, errlen, "32-byte header of %llu pages (more than any peer asks)",
			 (unsigned long long)x.nr_pages);
		return -1;
	}
	*h = (struct ps_iov){.cmd = x.cmd, .nr_pages = (uint32_t)x.nr_pages, .vaddr = x.vaddr, .dst_id = x.dst_id};
	return 0;
}

int ps_wire_parse(const char *s, enum ps_wire *w)
{
	if (!strcmp(s, "4.1") || !strcmp(s, "24"))
		*w = PS_WIRE_24;
	else if (!strcmp(s, "4.2") || !strcmp(s, "32"))
		*w = PS_WIRE_32;
	else
		return -1;
	return 0;
}

int ps_check_answer(const struct ps_iov *ans, const struct ps_iov *req, char *err, size_t errlen)
{
	if (ans->cmd != PS_ANSWER_CMD) {
		snprintf(err, errlen, "answer command %#x (want PS_IOV_ADD_F|PE_PRESENT %#x)", ans->cmd, PS_ANSWER_CMD);
		return -1;
	}
	if (ans->dst_id != req->dst_id) {
		snprintf(err, errlen, "answer for pid %llu (asked pid %llu)", (unsigned long long)ans->dst_id,
			 (unsigned long long)req->dst_id);
		return -1;
	}
	if (ans->vaddr != req->vaddr) {
		snprintf(err, errlen, "answer at %#llx (asked %#llx)", (unsigned long long)ans->vaddr,
			 (unsigned long long)req->vaddr);
		return -1;
	}
	if (ans->nr_pages == 0 || ans->nr_pages > req->nr_pages) {
		snprintf(err, errlen, "answer of %u pages (asked %u)", ans->nr_pages, req->nr_pages);
		return -1;
	}
	return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * The client's answer parser: the bytes a page server sends, in order,
 * against the GETs outstanding on that connection (answers come in request
 * order).  No I/O: psa_want() says where the next bytes go (the header
 * buffer, or straight into the destination of the request being answered,
 * so page bytes are received once, in place), psa_got() takes how many
 * arrived there.  Fuzzed by test/fuzz/fuzz_psclient.c.
 */
#ifndef LAZYRESTORE_TRANSPORT_ANSWER_H
#define LAZYRESTORE_TRANSPORT_ANSWER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plugin/transport/wire.h"

#define PSA_PAGE_SIZE 4096U

/* What is still wanted of one GET: left pages from vaddr, into dest. */
struct psa_req {
	uint32_t pid;
	uint32_t left;
	uint64_t vaddr;
	uint8_t *dest;
};

struct psa {
	enum ps_wire wire;
	uint8_t hdr[PS_HDR_MAX];
	size_t got;   /* of the header, then of the data */
	bool in_data; /* the header is in and checked */
	struct ps_iov ans;
	uint64_t off;	  /* stream offset of the next byte */
	uint64_t ans_off; /* where the current answer began */
};

enum { PSA_MORE, PSA_ANSWER, PSA_ERROR };

static inline void psa_init(struct psa *a, enum ps_wire w)
{
	*a = (struct psa){.wire = w};
}

/* Where up to *len next bytes go (head: the oldest GET outstanding, or NULL). */
void *psa_want(struct psa *a, const struct psa_req *head, size_t *len);

/*
 * n (<= the length psa_want gave) bytes arrived there.  PSA_MORE: want
 * more; PSA_ANSWER: an answer of *pages pages for head is complete in
 * head->dest (the caller advances head: pages may be fewer than left);
 * PSA_ERROR: err says what (header refused against head, or bytes when
 * nothing is outstanding), with the stream offset of the answer.
 */
int psa_got(struct psa *a, const struct psa_req *head, size_t n, uint32_t *pages, char *err, size_t errlen);

#endif

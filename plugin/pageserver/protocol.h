/* SPDX-License-Identifier: MIT */
/*
 * CRIU's page-server requests, as far as lazy serving needs them.  Raw
 * host-order headers (plugin/transport/wire.h), no magic, no version: every
 * field a peer sends is checked here before anyone acts on it.
 */
#ifndef LAZYRESTORE_PS_PROTOCOL_H
#define LAZYRESTORE_PS_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#include "images/image.h"
#include "plugin/transport/wire.h"

/* struct ps_iov, the commands and the header codec: plugin/transport/wire.h */
/* The largest answer we send at once; the protocol lets an answer be shorter than asked. */
#define PS_MAX_REPLY_PAGES 1024U
/* A request for more than this is not from a CRIU peer. */
#define PS_MAX_GET_PAGES (1U << 20)

enum ps_request {
	PS_REQ_GET,
	PS_REQ_CLOSE,
	PS_REQ_FORCE_CLOSE,
};

/*
 * Classify and check one request header.  Returns the request kind, or -1
 * with err describing the problem (unknown command, flags, zero or absurd
 * page count, unaligned address, pid out of range).
 */
int ps_check_request(const struct ps_iov *iov, char *err, size_t errlen);

/* What a server serves: one task's validated images and its mapped pages file. */
struct ps_image {
	uint32_t pid;
	const struct img_mm *mm;
	const uint8_t *pages;
	uint64_t pages_size;
	int pages_fd; /* the same file open, for sendfile; -1: none */
};

/*
 * The answer to a checked GET: *reply (PS_IOV_ADD_F, 1..PS_MAX_REPLY_PAGES
 * pages, never past the pagemap entry holding vaddr nor past pages_size) and
 * *data, its bytes in the pages file; *from (if not NULL) the image they are
 * in.  -1 with err if the dump does not hold the page (not in a present entry,
 * or not wholly inside pages_size).
 */
int ps_answer_get(const struct ps_image *imgs, size_t nr, const struct ps_iov *req, struct ps_iov *reply,
		  const uint8_t **data, const struct ps_image **from, char *err, size_t errlen);

#endif

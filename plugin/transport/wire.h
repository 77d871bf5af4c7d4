/* SPDX-License-Identifier: MIT */
/*
 * CRIU's page-server header, in one place for our server and our client.
 *
 * CRIU 4.1.1 (criu/page-xfer.c) sends a raw host-order 24-byte struct:
 * u32 cmd, u32 nr_pages, u64 vaddr, u64 dst_id.  A later CRIU widened
 * nr_pages to 64 bits with no negotiation: u32 cmd, 4 bytes of padding,
 * u64 nr_pages, u64 vaddr, u64 dst_id (32 bytes, natural alignment).  Both
 * decode into the same struct ps_iov; a 32-byte header whose nr_pages does
 * not fit 32 bits, or whose padding is not zero, is refused (no request or
 * answer of ours, nor of a CRIU peer, is that large).  Which format a
 * connection speaks is configured (PS_WIRE_*), never guessed.
 */
#ifndef LAZYRESTORE_TRANSPORT_WIRE_H
#define LAZYRESTORE_TRANSPORT_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One header as both formats carry it; the 4.1.1 wire layout exactly. */
struct ps_iov {
	uint32_t cmd; /* low 16 bits: command; high 16: pagemap flags */
	uint32_t nr_pages;
	uint64_t vaddr;
	uint64_t dst_id; /* PS_IOV_GET: the bare vpid */
} __attribute__((packed));

#define PS_IOV_ADD_F	   6
#define PS_IOV_GET	   7
#define PS_IOV_CLOSE	   0x1023
#define PS_IOV_FORCE_CLOSE 0x1024
#define PS_CMD_MASK	   0xffffU
#define PS_FLAGS_SHIFT	   16
#define PS_PE_PRESENT	   (1U << 2)
/* What a page server answers a GET with: PS_IOV_ADD_F, flags PE_PRESENT. */
#define PS_ANSWER_CMD (PS_IOV_ADD_F | (PS_PE_PRESENT << PS_FLAGS_SHIFT))

enum ps_wire {
	PS_WIRE_24, /* CRIU 4.1.1 (the default) */
	PS_WIRE_32, /* 64-bit nr_pages */
};

#define PS_HDR_MAX 32

static inline size_t ps_hdr_size(enum ps_wire w)
{
	return w == PS_WIRE_32 ? 32 : 24;
}

/* Write h in format w into buf (ps_hdr_size(w) bytes); returns that size. */
size_t ps_hdr_encode(enum ps_wire w, const struct ps_iov *h, void *buf);

/*
 * Read one header of format w from buf (ps_hdr_size(w) bytes) into *h.
 * 0, or -1 with err saying what is wrong (padding, a 64-bit count).
 */
int ps_hdr_decode(enum ps_wire w, const void *buf, struct ps_iov *h, char *err, size_t errlen);

/* "4.1" / "24" -> PS_WIRE_24, "4.2" / "32" -> PS_WIRE_32; -1 for anything else. */
int ps_wire_parse(const char *s, enum ps_wire *w);

/*
 * Check one answer header against the GET it answers (pid, vaddr, nr_pages
 * asked): it must be PS_IOV_ADD_F with PE_PRESENT, for the same pid and
 * address, and carry 1..asked pages.  0, or -1 with err naming the problem.
 */
int ps_check_answer(const struct ps_iov *ans, const struct ps_iov *req, char *err, size_t errlen);

#endif

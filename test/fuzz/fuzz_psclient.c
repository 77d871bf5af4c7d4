// SPDX-License-Identifier: MIT
/*
 * fuzz_psclient: the page-server client's answer parser (plugin/transport/
 * answer.c, psa_want/psa_got, as client.c drives them) reading a hostile
 * server's stream against GETs it made.  Every byte must land where the
 * parser said (inside the header buffer or inside the destination of the
 * GET being answered: ASan sees any overflow of the exact-size buffers), an
 * accepted answer must be PS_IOV_ADD_F|PE_PRESENT for the same pid and
 * address with 1..asked pages (checked here from the raw stream bytes, not
 * from what the parser decoded), its pages must be the stream's bytes, and
 * a byte past the last GET must be refused.
 *
 * Input (host order):
 *   u8 mode: bit 0: 32-byte headers; bits 1-7: how the stream is cut into reads
 *   u8 gets: 1 + gets % 16 GETs, each {u32 pid (0 -> 1), u64 vaddr (page-aligned), u8 pages: 1 + pages % 64}
 *   then the server's stream to the end.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/transport/answer.h"
#include "test/fuzz/fuzz.h"

#define MAX_GETS 16
#define ERR_LEN	 300

struct get {
	struct psa_req r;
	uint8_t *buf;
	uint32_t pages;
};

/* The raw header at stream offset off, decoded here independently of wire.c. */
static bool raw_header(const uint8_t *s, size_t len, uint64_t off, bool wide, struct ps_iov *h)
{
	uint32_t nr32;
	uint64_t nr64;

	if (off + (wide ? 32 : 24) > len)
		return false;
	memcpy(&h->cmd, s + off, 4);
	if (wide) {
		memcpy(&nr64, s + off + 8, 8);
		h->nr_pages = (uint32_t)nr64;
		memcpy(&h->vaddr, s + off + 16, 8);
		memcpy(&h->dst_id, s + off + 24, 8);
		return nr64 <= UINT32_MAX;
	}
	memcpy(&nr32, s + off + 4, 4);
	h->nr_pages = nr32;
	memcpy(&h->vaddr, s + off + 8, 8);
	memcpy(&h->dst_id, s + off + 16, 8);
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = {data, size};
	struct get gets[MAX_GETS];
	uint8_t mode, n;
	size_t nr = 0, head = 0, pos = 0;
	struct psa a;
	char err[ERR_LEN];

	if (!take(&in, &mode, 1) || !take(&in, &n, 1))
		return 0;
	n = 1 + n % MAX_GETS;
	while (nr < n) {
		uint32_t pid;
		uint64_t vaddr;
		uint8_t pages;

		if (!take(&in, &pid, 4) || !take(&in, &vaddr, 8) || !take(&in, &pages, 1))
			break;
		gets[nr].pages = 1 + pages % 64;
		gets[nr].buf = malloc((size_t)gets[nr].pages * PSA_PAGE_SIZE);
		if (!gets[nr].buf)
			fatal("out of memory");
		gets[nr].r = (struct psa_req){pid ? pid : 1, gets[nr].pages, vaddr & ~(uint64_t)(PSA_PAGE_SIZE - 1),
					      gets[nr].buf};
		nr++;
	}
	const bool wide = mode & 1;
	const uint8_t *s = in.p;
	const size_t len = in.left;
	const size_t hs = wide ? 32 : 24;

	psa_init(&a, wide ? PS_WIRE_32 : PS_WIRE_24);
	while (pos < len) {
		struct psa_req *r = head < nr ? &gets[head].r : NULL;
		size_t want, cut = 1 + (size_t)((pos * 2654435761U) >> (mode >> 1 & 15)) % 9000, got;
		uint8_t *to = psa_want(&a, r, &want);
		uint32_t pages = 0;
		int st;

		if (!want)
			violation("psa_want asked for 0 bytes at %zu", pos);
		/* where it may write: the header buffer, or the rest of the head's destination */
		if (!(to >= a.hdr && to + want <= a.hdr + sizeof(a.hdr)) &&
		    !(r && to >= r->dest && to + want <= r->dest + (size_t)r->left * PSA_PAGE_SIZE))
			violation("psa_want points outside the header and the destination at %zu", pos);
		got = want < cut ? want : cut;
		if (got > len - pos)
			got = len - pos;
		memcpy(to, s + pos, got);
		pos += got;
		st = psa_got(&a, r, got, &pages, err, sizeof(err));
		if (st == PSA_ERROR)
			break;
		if (!r && st != PSA_MORE)
			violation("an answer accepted with no GET outstanding");
		if (st == PSA_ANSWER) {
			struct ps_iov h;
			uint64_t hoff = a.off - (uint64_t)pages * PSA_PAGE_SIZE - hs;

			if (!raw_header(s, len, hoff, wide, &h))
				violation("an answer accepted from a header that does not fit 32 bits or the stream");
			if (h.cmd != PS_ANSWER_CMD || h.dst_id != r->pid || h.vaddr != r->vaddr ||
			    h.nr_pages != pages || pages == 0 || pages > r->left)
				violation(
				    "accepted answer cmd %#x pid %llu %#llx %u pages to GET pid %u %#llx %u pages",
				    h.cmd, (unsigned long long)h.dst_id, (unsigned long long)h.vaddr, h.nr_pages,
				    r->pid, (unsigned long long)r->vaddr, r->left);
			if (wide && (s[hoff + 4] | s[hoff + 5] | s[hoff + 6] | s[hoff + 7]))
				violation("a 32-byte header with nonzero padding accepted");
			if (memcmp(r->dest, s + hoff + hs, (size_t)pages * PSA_PAGE_SIZE))
				violation("answer pages differ from the stream's bytes");
			r->left -= pages;
			r->vaddr += (uint64_t)pages * PSA_PAGE_SIZE;
			r->dest += (size_t)pages * PSA_PAGE_SIZE;
			if (!r->left)
				head++;
		}
	}
	for (size_t i = 0; i < nr; i++)
		free(gets[i].buf);
	return 0;
}

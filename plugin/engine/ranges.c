// SPDX-License-Identifier: MIT
/* Lazy range bookkeeping: sorted ranges in blocks, per task, edited by events. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/engine/ranges.h"

#define PAGE IMG_PAGE_SIZE

void lr_ranges_init(struct lr_ranges *r)
{
	memset(r, 0, sizeof(*r));
}

/* A place in r: block b, index i; b == nb is the end. */
struct pos {
	size_t b, i;
};

void lr_ranges_free(struct lr_ranges *r)
{
	for (size_t k = 0; k < r->nb; k++)
		free(r->b[k]);
	free(r->b);
	lr_ranges_init(r);
}

static struct lr_range *at(const struct lr_ranges *r, struct pos p)
{
	return &r->b[p.b]->v[p.i];
}

static bool valid(const struct lr_ranges *r, struct pos p)
{
	return p.b < r->nb;
}

static void step(const struct lr_ranges *r, struct pos *p)
{
	if (++p->i == r->b[p->b]->n) {
		p->b++;
		p->i = 0;
	}
}

/* The first range whose end is above addr (the range holding addr, or the next). */
static struct pos lower(const struct lr_ranges *r, uint64_t addr)
{
	size_t lo = 0, hi = r->nb;

	while (lo < hi) { /* the first block whose last range ends above addr */
		size_t mid = lo + (hi - lo) / 2;
		const struct lr_rblock *bl = r->b[mid];
		if (bl->v[bl->n - 1].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == r->nb)
		return (struct pos){r->nb, 0};
	const struct lr_rblock *bl = r->b[lo];
	size_t l = 0, h = bl->n;
	while (l < h) {
		size_t mid = l + (h - l) / 2;
		if (bl->v[mid].end <= addr)
			l = mid + 1;
		else
			h = mid;
	}
	return (struct pos){lo, l};
}

/* A new empty block at index k of the block list. */
static struct lr_rblock *new_block(struct lr_ranges *r, size_t k)
{
	if (r->nb == r->capb) {
		size_t cap = r->capb ? r->capb * 2 : 8;
		struct lr_rblock **v = realloc(r->b, cap * sizeof(*v));
		if (!v)
			return NULL;
		r->b = v;
		r->capb = cap;
	}
	struct lr_rblock *bl = malloc(sizeof(*bl));
	if (!bl)
		return NULL;
	bl->n = 0;
	memmove(&r->b[k + 1], &r->b[k], (r->nb - k) * sizeof(r->b[0]));
	r->b[k] = bl;
	r->nb++;
	return bl;
}

/* Insert x at p (before what is there); the caller keeps order and counts. */
static int insert_at(struct lr_ranges *r, struct pos p, struct lr_range x)
{
	if (!r->nb) {
		if (!new_block(r, 0))
			return -1;
		p = (struct pos){0, 0};
	} else if (p.b == r->nb) { /* after the last: at the end of the last block */
		p = (struct pos){r->nb - 1, r->b[r->nb - 1]->n};
	}
	struct lr_rblock *bl = r->b[p.b];
	if (bl->n == LR_RBLOCK) { /* full: its upper half into a new block after it */
		struct lr_rblock *nb = new_block(r, p.b + 1);
		if (!nb)
			return -1;
		size_t half = LR_RBLOCK / 2;
		memcpy(nb->v, bl->v + half, (LR_RBLOCK - half) * sizeof(bl->v[0]));
		nb->n = LR_RBLOCK - half;
		bl->n = half;
		if (p.i > half) {
			bl = nb;
			p.i -= half;
		}
	}
	memmove(&bl->v[p.i + 1], &bl->v[p.i], (bl->n - p.i) * sizeof(bl->v[0]));
	bl->v[p.i] = x;
	bl->n++;
	r->nr++;
	return 0;
}

/* Remove the range at p; p then names the one after it. */
static void remove_at(struct lr_ranges *r, struct pos *p)
{
	struct lr_rblock *bl = r->b[p->b];

	memmove(&bl->v[p->i], &bl->v[p->i + 1], (bl->n - p->i - 1) * sizeof(bl->v[0]));
	bl->n--;
	r->nr--;
	if (!bl->n) {
		free(bl);
		memmove(&r->b[p->b], &r->b[p->b + 1], (r->nb - p->b - 1) * sizeof(r->b[0]));
		r->nb--;
		p->i = 0;
	} else if (p->i == bl->n) {
		p->b++;
		p->i = 0;
	}
}

int lr_ranges_add(struct lr_ranges *r, uint64_t start, uint64_t end, uint64_t img)
{
	if (start >= end)
		return 0;
	struct pos p = lower(r, start);
	if (valid(r, p) && at(r, p)->start < end)
		return -1; /* overlap: a bookkeeping bug, refuse it */
	if (insert_at(r, p, (struct lr_range){start, end, img}))
		return -1;
	r->pages += (end - start) / PAGE;
	return 0;
}

const struct lr_range *lr_ranges_get(const struct lr_ranges *r, uint64_t addr)
{
	struct pos p = lower(r, addr);

	return valid(r, p) && at(r, p)->start <= addr ? at(r, p) : NULL;
}

const struct lr_range *lr_ranges_first(const struct lr_ranges *r)
{
	return r->nb ? &r->b[0]->v[0] : NULL;
}

const struct lr_range *lr_ranges_nth(const struct lr_ranges *r, size_t k)
{
	for (size_t i = 0; i < r->nb; k -= r->b[i++]->n)
		if (k < r->b[i]->n)
			return &r->b[i]->v[k];
	return NULL;
}

bool lr_ranges_overlap(const struct lr_ranges *r, uint64_t start, uint64_t end)
{
	struct pos p = lower(r, start);

	return valid(r, p) && at(r, p)->start < end;
}

int lr_ranges_drop(struct lr_ranges *r, uint64_t start, uint64_t end)
{
	if (start >= end)
		return 0;
	struct pos p = lower(r, start);

	while (valid(r, p) && at(r, p)->start < end) {
		struct lr_range *c = at(r, p);
		uint64_t cs = c->start > start ? c->start : start;
		uint64_t ce = c->end < end ? c->end : end;

		if (cs > c->start && ce < c->end) {
			/* hole in the middle: split in two */
			struct lr_range tail = {ce, c->end, c->img + (ce - c->start)};
			struct pos after = {p.b, p.i + 1};
			c->end = cs;
			if (insert_at(r, after, tail)) {
				c->end = tail.end; /* unchanged on failure */
				return -1;
			}
			r->pages -= (ce - cs) / PAGE;
			return 0;
		}
		r->pages -= (ce - cs) / PAGE;
		if (cs > c->start) { /* keep the head */
			c->end = cs;
			step(r, &p);
		} else if (ce < c->end) { /* keep the tail */
			c->img += ce - c->start;
			c->start = ce;
			step(r, &p);
		} else {
			remove_at(r, &p);
		}
	}
	return 0;
}

int lr_ranges_remap(struct lr_ranges *r, uint64_t from, uint64_t to, uint64_t len)
{
	uint64_t end = from + len;
	struct lr_ranges moved;
	int ret = -1;

	lr_ranges_init(&moved);
	for (struct pos p = lower(r, from); valid(r, p) && at(r, p)->start < end; step(r, &p)) {
		const struct lr_range *c = at(r, p);
		uint64_t cs = c->start > from ? c->start : from;
		uint64_t ce = c->end < end ? c->end : end;

		if (lr_ranges_add(&moved, cs - from + to, ce - from + to, c->img + (cs - c->start)))
			goto out;
	}
	/* The kernel unmapped whatever was at the target before the move. */
	if (lr_ranges_drop(r, from, end) || lr_ranges_drop(r, to, to + len) || lr_ranges_merge(r, &moved))
		goto out;
	ret = 0;
out:
	lr_ranges_free(&moved);
	return ret;
}

int lr_ranges_copy(struct lr_ranges *dst, const struct lr_ranges *src)
{
	for (size_t k = 0; k < src->nb; k++) {
		struct lr_rblock *bl = new_block(dst, dst->nb);
		if (!bl)
			return -1;
		*bl = *src->b[k];
	}
	dst->nr = src->nr;
	dst->pages = src->pages;
	return 0;
}

int lr_ranges_merge(struct lr_ranges *dst, const struct lr_ranges *src)
{
	for (size_t k = 0; k < src->nb; k++)
		for (size_t i = 0; i < src->b[k]->n; i++) {
			const struct lr_range *c = &src->b[k]->v[i];
			if (lr_ranges_add(dst, c->start, c->end, c->img))
				return -1;
		}
	return 0;
}

int lr_ranges_pick(const struct lr_ranges *r, uint64_t hint, uint64_t chunk, struct lr_range *out)
{
	if (!r->nb)
		return -1;
	struct pos p = lower(r, hint);
	if (!valid(r, p))
		p = (struct pos){0, 0};
	const struct lr_range *c = at(r, p);
	uint64_t s = hint & ~(chunk - 1);

	if (s < c->start || s >= c->end)
		s = c->start;
	uint64_t e = (s & ~(chunk - 1)) + chunk;
	if (e - s < chunk / 2) /* a small tail of a block: take a full chunk instead */
		e = s + chunk;
	if (e > c->end)
		e = c->end;
	out->start = s;
	out->end = e;
	out->img = c->img + (s - c->start);
	return 0;
}

static int add_clipped(struct lr_ranges *r, const struct img_mm *mm, const struct img_pme *pe, char *err, size_t errlen)
{
	uint64_t pend = pe->vaddr + (uint64_t)pe->nr_pages * PAGE;
	long vi = img_find_vma(mm, pe->vaddr);

	if (vi < 0) {
		snprintf(err, errlen, "pagemap-%u.img: lazy entry at 0x%llx is in no VMA", mm->pid,
			 (unsigned long long)pe->vaddr);
		return -1;
	}
	for (size_t k = vi; k < mm->nr_vmas && mm->vmas[k].start < pend; k++) {
		const struct img_vma *v = &mm->vmas[k];
		uint64_t s = v->start > pe->vaddr ? v->start : pe->vaddr;
		uint64_t e = v->end < pend ? v->end : pend;

		if (!img_vma_can_be_lazy(v)) {
			snprintf(err, errlen,
				 "pagemap-%u.img: lazy entry at 0x%llx covers VMA 0x%llx-0x%llx, "
				 "which cannot be lazy",
				 mm->pid, (unsigned long long)pe->vaddr, (unsigned long long)v->start,
				 (unsigned long long)v->end);
			return -1;
		}
		if (lr_ranges_add(r, s, e, s)) {
			snprintf(err, errlen, "pagemap-%u.img: entry at 0x%llx: overlapping or out of memory", mm->pid,
				 (unsigned long long)pe->vaddr);
			return -1;
		}
	}
	return 0;
}

int lr_ranges_build(struct lr_ranges *r, const struct img_mm *mm, char *err, size_t errlen)
{
	return lr_ranges_build_for(r, mm, false, err, errlen);
}

int lr_ranges_build_for(struct lr_ranges *r, const struct img_mm *mm, bool remote, char *err, size_t errlen)
{
	for (size_t i = 0; i < mm->nr_pmes; i++) {
		const struct img_pme *pe = &mm->pmes[i];

		if (!(pe->flags & IMG_PE_LAZY))
			continue;
		if (!remote && !(pe->flags & IMG_PE_PRESENT)) {
			/* dump --lazy-pages: the data is on the dump side, not in pages-*.img */
			snprintf(err, errlen, "pagemap-%u.img: lazy entry at 0x%llx has no data in the local image",
				 mm->pid, (unsigned long long)pe->vaddr);
			return -1;
		}
		if (add_clipped(r, mm, pe, err, errlen))
			return -1;
	}
	return 0;
}

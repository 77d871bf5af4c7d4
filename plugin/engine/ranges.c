// SPDX-License-Identifier: MIT
/* Lazy range bookkeeping: a sorted array per task, edited by events. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/engine/ranges.h"

#define PAGE IMG_PAGE_SIZE

void lr_ranges_init(struct lr_ranges *r)
{
	memset(r, 0, sizeof(*r));
}

void lr_ranges_free(struct lr_ranges *r)
{
	free(r->v);
	lr_ranges_init(r);
}

static int grow(struct lr_ranges *r, size_t need)
{
	if (r->nr + need <= r->cap)
		return 0;
	size_t cap = r->cap ? r->cap * 2 : 16;
	while (cap < r->nr + need)
		cap *= 2;
	struct lr_range *v = realloc(r->v, cap * sizeof(*v));
	if (!v)
		return -1;
	r->v = v;
	r->cap = cap;
	return 0;
}

/* First index whose end is above addr (the range holding addr, or the next). */
static size_t lower_bound(const struct lr_ranges *r, uint64_t addr)
{
	size_t lo = 0, hi = r->nr;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (r->v[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int lr_ranges_add(struct lr_ranges *r, uint64_t start, uint64_t end, uint64_t img)
{
	if (start >= end)
		return 0;
	size_t i = lower_bound(r, start);
	if (i < r->nr && r->v[i].start < end)
		return -1; /* overlap: a bookkeeping bug, refuse it */
	if (grow(r, 1))
		return -1;
	memmove(&r->v[i + 1], &r->v[i], (r->nr - i) * sizeof(r->v[0]));
	r->v[i] = (struct lr_range){start, end, img};
	r->nr++;
	r->pages += (end - start) / PAGE;
	return 0;
}

long lr_ranges_find(const struct lr_ranges *r, uint64_t addr)
{
	size_t i = lower_bound(r, addr);

	if (i < r->nr && r->v[i].start <= addr)
		return (long)i;
	return -1;
}

int lr_ranges_drop(struct lr_ranges *r, uint64_t start, uint64_t end)
{
	if (start >= end)
		return 0;
	size_t i = lower_bound(r, start);

	while (i < r->nr && r->v[i].start < end) {
		struct lr_range *c = &r->v[i];
		uint64_t cs = c->start > start ? c->start : start;
		uint64_t ce = c->end < end ? c->end : end;

		r->pages -= (ce - cs) / PAGE;
		if (cs > c->start && ce < c->end) {
			/* hole in the middle: split in two */
			if (grow(r, 1))
				return -1;
			memmove(&r->v[i + 1], &r->v[i], (r->nr - i) * sizeof(r->v[0]));
			r->nr++;
			r->v[i].end = cs;
			r->v[i + 1].img += ce - r->v[i + 1].start;
			r->v[i + 1].start = ce;
			return 0;
		}
		if (cs > c->start) { /* keep the head */
			c->end = cs;
			i++;
		} else if (ce < c->end) { /* keep the tail */
			c->img += ce - c->start;
			c->start = ce;
			i++;
		} else {
			memmove(&r->v[i], &r->v[i + 1], (r->nr - i - 1) * sizeof(r->v[0]));
			r->nr--;
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
	for (size_t k = lower_bound(r, from); k < r->nr && r->v[k].start < end; k++) {
		const struct lr_range *c = &r->v[k];
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
	if (grow(dst, src->nr))
		return -1;
	if (src->nr) /* (v may be NULL when empty) */
		memcpy(dst->v, src->v, src->nr * sizeof(src->v[0]));
	dst->nr = src->nr;
	dst->pages = src->pages;
	return 0;
}

int lr_ranges_merge(struct lr_ranges *dst, const struct lr_ranges *src)
{
	for (size_t i = 0; i < src->nr; i++)
		if (lr_ranges_add(dst, src->v[i].start, src->v[i].end, src->v[i].img))
			return -1;
	return 0;
}

int lr_ranges_pick(const struct lr_ranges *r, uint64_t hint, uint64_t chunk, struct lr_range *out)
{
	if (!r->nr)
		return -1;
	size_t i = lower_bound(r, hint);
	if (i == r->nr)
		i = 0;
	const struct lr_range *c = &r->v[i];
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

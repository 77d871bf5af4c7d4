// SPDX-License-Identifier: MIT
/*
 * mm-<pid>.img (VMAs) and pagemap-<pid>.img (which pages were dumped, where
 * their bytes are), checked against each other and the pages file's size.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "images/internal.h"
#include "mm.pb-c.h"
#include "pagemap.pb-c.h"

#define PAGE_MASK_LO (IMG_PAGE_SIZE - 1)

static int read_vmas(const struct img_file *f, size_t off, const MmEntry *me, struct img_mm *mm, struct img_err *err)
{
	if (me->n_vmas > IMG_MAX_VMAS)
		return img_fail(err, f->name, off, "%zu VMAs exceed the bound of %u", me->n_vmas, IMG_MAX_VMAS);
	if (!me->n_vmas)
		return 0;
	mm->vmas = calloc(me->n_vmas, sizeof(*mm->vmas));
	if (!mm->vmas)
		return img_fail(err, f->name, off, "out of memory");
	for (size_t i = 0; i < me->n_vmas; i++) {
		const VmaEntry *ve = me->vmas[i];
		struct img_vma *v = &mm->vmas[i];

		if ((ve->start | ve->end) & PAGE_MASK_LO)
			return img_fail(err, f->name, off, "VMA %zu %#llx-%#llx is not page-aligned", i,
					(unsigned long long)ve->start, (unsigned long long)ve->end);
		if (ve->start >= ve->end)
			return img_fail(err, f->name, off, "VMA %zu %#llx-%#llx is empty or reversed", i,
					(unsigned long long)ve->start, (unsigned long long)ve->end);
		if (i && ve->start < mm->vmas[i - 1].end)
			return img_fail(err, f->name, off, "VMA %zu at %#llx overlaps or precedes VMA %zu (ends %#llx)",
					i, (unsigned long long)ve->start, i - 1,
					(unsigned long long)mm->vmas[i - 1].end);
		v->start = ve->start;
		v->end = ve->end;
		v->pgoff = ve->pgoff;
		v->shmid = ve->shmid;
		v->prot = ve->prot;
		v->flags = ve->flags;
		v->status = ve->status;
		v->madv = ve->has_madv ? ve->madv : 0;
		mm->nr_vmas++;
	}
	return 0;
}

static int read_mm_image(struct img_dir *d, struct img_mm *mm, struct img_err *err)
{
	MmEntry *me = NULL;
	struct img_file f;
	size_t off;
	char name[64];
	int ret = -1;

	snprintf(name, sizeof(name), "mm-%u.img", mm->pid);
	if (img_file_open(d, name, IMG_MM_MAGIC, &f, NULL, err))
		return -1;
	if (img_file_next_msg(&f, &mm_entry__descriptor, true, (void **)&me, &off, err) < 0)
		goto out;
	mm->thp_disabled = me->has_thp_disabled && me->thp_disabled;
	ret = read_vmas(&f, off, me, mm, err);
out:
	if (me)
		mm_entry__free_unpacked(me, NULL);
	img_file_close(&f);
	return ret;
}

/* Is [start, end) covered by consecutive VMAs?  *vi is a cursor kept across sorted calls. */
static bool covered_by_vmas(const struct img_mm *mm, size_t *vi, uint64_t start, uint64_t end)
{
	while (*vi < mm->nr_vmas && mm->vmas[*vi].end <= start)
		(*vi)++;
	for (size_t i = *vi; i < mm->nr_vmas; i++) {
		if (mm->vmas[i].start > start)
			return false;
		if (mm->vmas[i].end >= end)
			return true;
		start = mm->vmas[i].end;
	}
	return false;
}

static int add_pme(struct img_mm *mm, size_t *cap, const struct img_pme *pme)
{
	if (mm->nr_pmes == *cap) {
		size_t ncap = *cap ? *cap * 2 : 64;
		struct img_pme *n = realloc(mm->pmes, ncap * sizeof(*n));

		if (!n)
			return -1;
		mm->pmes = n;
		*cap = ncap;
	}
	mm->pmes[mm->nr_pmes++] = *pme;
	return 0;
}

static int check_pme(const struct img_file *f, size_t off, const struct img_mm *mm, size_t *vi, const struct img_pme *p,
		     struct img_err *err)
{
	const uint32_t known = IMG_PE_PARENT | IMG_PE_LAZY | IMG_PE_PRESENT;
	uint64_t len = (uint64_t)p->nr_pages << IMG_PAGE_SHIFT;

	if (p->vaddr & PAGE_MASK_LO)
		return img_fail(err, f->name, off, "pagemap entry at %#llx is not page-aligned",
				(unsigned long long)p->vaddr);
	if (p->nr_pages == 0)
		return img_fail(err, f->name, off, "pagemap entry at %#llx has 0 pages", (unsigned long long)p->vaddr);
	if (p->vaddr > UINT64_MAX - len)
		return img_fail(err, f->name, off, "pagemap entry at %#llx + %u pages wraps around",
				(unsigned long long)p->vaddr, p->nr_pages);
	if (p->flags & ~known)
		return img_fail(err, f->name, off, "pagemap entry at %#llx has unknown flags %#x",
				(unsigned long long)p->vaddr, p->flags);
	if ((p->flags & IMG_PE_PARENT) && (p->flags & (IMG_PE_LAZY | IMG_PE_PRESENT)))
		return img_fail(err, f->name, off, "pagemap entry at %#llx: flags %#x mix PE_PARENT with data",
				(unsigned long long)p->vaddr, p->flags);
	if (!(p->flags & known))
		return img_fail(err, f->name, off, "pagemap entry at %#llx has no flags", (unsigned long long)p->vaddr);
	if (mm->nr_pmes) {
		const struct img_pme *q = &mm->pmes[mm->nr_pmes - 1];
		uint64_t qend = q->vaddr + ((uint64_t)q->nr_pages << IMG_PAGE_SHIFT);

		if (p->vaddr < q->vaddr)
			return img_fail(err, f->name, off, "pagemap entry at %#llx is out of order: after one at %#llx",
					(unsigned long long)p->vaddr, (unsigned long long)q->vaddr);
		if (p->vaddr < qend)
			return img_fail(
			    err, f->name, off, "pagemap entry at %#llx overlaps the one before (%#llx-%#llx)",
			    (unsigned long long)p->vaddr, (unsigned long long)q->vaddr, (unsigned long long)qend);
	}
	if (!covered_by_vmas(mm, vi, p->vaddr, p->vaddr + len))
		return img_fail(err, f->name, off, "pagemap entry %#llx-%#llx is not inside the task's VMAs",
				(unsigned long long)p->vaddr, (unsigned long long)(p->vaddr + len));
	return 0;
}

static int read_pagemap_head(struct img_file *f, struct img_mm *mm, struct img_err *err)
{
	PagemapHead *ph;
	size_t off;

	if (img_file_next_msg(f, &pagemap_head__descriptor, true, (void **)&ph, &off, err) < 0)
		return -1;
	mm->pages_id = ph->pages_id;
	pagemap_head__free_unpacked(ph, NULL);
	return 0;
}

static int read_pagemap(struct img_dir *d, struct img_mm *mm, struct img_err *err)
{
	size_t cap = 0, vi = 0, off;
	PagemapEntry *pe;
	struct img_file f;
	char name[64];
	int r;

	snprintf(name, sizeof(name), "pagemap-%u.img", mm->pid);
	if (img_file_open(d, name, IMG_PAGEMAP_MAGIC, &f, NULL, err))
		return -1;
	if (read_pagemap_head(&f, mm, err))
		goto fail;
	while ((r = img_file_next_msg(&f, &pagemap_entry__descriptor, false, (void **)&pe, &off, err)) == 1) {
		struct img_pme p = {0}; /* file_off is set after check_pme(), which does not read it */

		p.vaddr = pe->vaddr;
		p.nr_pages = pe->nr_pages;
		/* CRIU's compat rules for images of older versions */
		if (pe->has_in_parent && pe->in_parent)
			p.flags = (pe->has_flags ? pe->flags : 0) | IMG_PE_PARENT;
		else
			p.flags = pe->has_flags ? pe->flags : IMG_PE_PRESENT;
		pagemap_entry__free_unpacked(pe, NULL);

		if (check_pme(&f, off, mm, &vi, &p, err))
			goto fail;
		p.file_off = mm->pages_bytes;
		if (p.flags & IMG_PE_PRESENT)
			mm->pages_bytes += (uint64_t)p.nr_pages << IMG_PAGE_SHIFT;
		if (add_pme(mm, &cap, &p)) {
			img_fail(err, f.name, off, "out of memory");
			goto fail;
		}
	}
	if (r < 0)
		goto fail;
	img_file_close(&f);
	return 0;
fail:
	img_file_close(&f);
	return -1;
}

/* The pages file must hold every byte the pagemap points at. */
static int check_pages_size(struct img_dir *d, struct img_mm *mm, struct img_err *err)
{
	char name[64], pmname[300];
	struct stat st;

	snprintf(pmname, sizeof(pmname), "%s/pagemap-%u.img", d->path, mm->pid);
	if (!mm->pages_bytes)
		return 0;
	snprintf(name, sizeof(name), "pages-%u.img", mm->pages_id);
	if (fstatat(d->fd, name, &st, 0) < 0)
		return img_fail(err, pmname, 0, "its pages file %s/%s: %s", d->path, name, strerror(errno));
	if ((uint64_t)st.st_size >= mm->pages_bytes)
		return 0;
	for (size_t i = 0; i < mm->nr_pmes; i++) {
		const struct img_pme *p = &mm->pmes[i];

		if ((p->flags & IMG_PE_PRESENT) &&
		    p->file_off + ((uint64_t)p->nr_pages << IMG_PAGE_SHIFT) > (uint64_t)st.st_size)
			return img_fail(err, pmname, 0,
					"entry %zu (%#llx, %u pages) needs bytes %llu-%llu of %s, which has only %lld",
					i, (unsigned long long)p->vaddr, p->nr_pages, (unsigned long long)p->file_off,
					(unsigned long long)(p->file_off + ((uint64_t)p->nr_pages << IMG_PAGE_SHIFT)),
					name, (long long)st.st_size);
	}
	return img_fail(err, pmname, 0, "pages file %s is shorter than the pagemap needs", name);
}

int img_read_mm(struct img_dir *d, uint32_t pid, struct img_mm *mm, struct img_err *err)
{
	memset(mm, 0, sizeof(*mm));
	mm->pid = pid;
	if (read_mm_image(d, mm, err) || read_pagemap(d, mm, err) || check_pages_size(d, mm, err)) {
		img_mm_free(mm);
		return -1;
	}
	return 0;
}

void img_mm_free(struct img_mm *mm)
{
	free(mm->vmas);
	free(mm->pmes);
	mm->vmas = NULL;
	mm->pmes = NULL;
	mm->nr_vmas = mm->nr_pmes = 0;
}

long img_find_vma(const struct img_mm *mm, uint64_t vaddr)
{
	size_t lo = 0, hi = mm->nr_vmas;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (vaddr < mm->vmas[mid].start)
			hi = mid;
		else if (vaddr >= mm->vmas[mid].end)
			lo = mid + 1;
		else
			return mid;
	}
	return -1;
}

long img_find_pme(const struct img_mm *mm, uint64_t vaddr)
{
	size_t lo = 0, hi = mm->nr_pmes;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct img_pme *p = &mm->pmes[mid];

		if (vaddr < p->vaddr)
			hi = mid;
		else if (vaddr >= p->vaddr + ((uint64_t)p->nr_pages << IMG_PAGE_SHIFT))
			lo = mid + 1;
		else
			return mid;
	}
	return -1;
}

int img_lookup(const struct img_mm *mm, uint64_t vaddr, struct img_page_run *r)
{
	long i = img_find_pme(mm, vaddr);
	const struct img_pme *p;

	*r = (struct img_page_run){.pme = i};
	if (i < 0)
		return -1;
	p = &mm->pmes[i];
	if (!(p->flags & IMG_PE_PRESENT))
		return -1;
	uint64_t page = vaddr & ~PAGE_MASK_LO;
	r->off = p->file_off + (page - p->vaddr);
	r->pages = p->nr_pages - ((page - p->vaddr) >> IMG_PAGE_SHIFT);
	return 0;
}

int img_page_offset(const struct img_mm *mm, uint64_t vaddr, uint64_t *off)
{
	struct img_page_run r;

	if (img_lookup(mm, vaddr, &r))
		return -1;
	*off = r.off;
	return 0;
}

bool img_vma_can_be_lazy(const struct img_vma *v)
{
	const uint32_t never = IMG_VMA_AREA_VDSO | IMG_VMA_AREA_VVAR | IMG_VMA_AREA_VSYSCALL;

	return (v->flags & MAP_ANONYMOUS) && (v->flags & MAP_PRIVATE) && !(v->flags & MAP_LOCKED) &&
	       !(v->flags & MAP_HUGETLB) && !(v->status & never);
}

int img_pages_map(struct img_dir *d, uint32_t pages_id, struct img_pages *p, struct img_err *err)
{
	char name[64], full[320];
	struct stat st;
	void *base;

	memset(p, 0, sizeof(*p));
	p->fd = -1;
	p->id = pages_id;
	snprintf(name, sizeof(name), "pages-%u.img", pages_id);
	snprintf(full, sizeof(full), "%s/%s", d->path, name);
	p->fd = openat(d->fd, name, O_RDONLY | O_CLOEXEC);
	if (p->fd < 0)
		return img_fail(err, full, 0, "cannot open: %s", strerror(errno));
	if (fstat(p->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		img_fail(err, full, 0, "not a readable regular file");
		goto fail;
	}
	p->size = st.st_size;
	if (!p->size)
		return 0;
	base = mmap(NULL, p->size, PROT_READ, MAP_PRIVATE, p->fd, 0);
	if (base == MAP_FAILED) {
		img_fail(err, full, 0, "cannot mmap %llu bytes: %s", (unsigned long long)p->size, strerror(errno));
		goto fail;
	}
	p->base = base;
	return 0;
fail:
	close(p->fd);
	p->fd = -1;
	return -1;
}

void img_pages_unmap(struct img_pages *p)
{
	if (p->base)
		munmap((void *)p->base, p->size);
	if (p->fd >= 0)
		close(p->fd);
	p->base = NULL;
	p->fd = -1;
}

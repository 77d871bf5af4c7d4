// SPDX-License-Identifier: MIT
/*
 * Page source over local pages-*.img files, in one of two ways (probe.c picks):
 * read() preads into the caller's buffer; get() returns a pointer into the
 * file's mapping, so the kernel copies straight from the page cache.  Mapped
 * source pages must be in our page tables or UFFDIO_COPY takes its slow path,
 * so get() populates what it hands out (MADV_POPULATE_READ).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "plugin/log/log.h"
#include "plugin/source/source.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

struct file_task {
	uint32_t pid;
	const struct img_mm *mm;
	struct img_pages pages;
};

struct file_source {
	struct page_source base;
	struct file_task *tasks; /* sorted by pid */
	size_t nr;
};

static int cmp_pid(const void *a, const void *b)
{
	const struct file_task *x = a, *y = b;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static struct file_task *find_task(struct file_source *fs, uint32_t pid)
{
	struct file_task key = {.pid = pid};
	return bsearch(&key, fs->tasks, fs->nr, sizeof(key), cmp_pid);
}

/* Map the file's pages into our page tables; EFAULT means truncated or I/O error. */
static int populate(const uint8_t *p, uint64_t len)
{
	uintptr_t a = (uintptr_t)p & ~(IMG_PAGE_SIZE - 1);
	uint64_t l = len + ((uintptr_t)p - a);

	while (madvise((void *)a, l, MADV_POPULATE_READ)) {
		if (errno == EINTR || errno == EAGAIN)
			continue;
		if (errno == EINVAL) /* kernel without POPULATE_READ: read-ahead at least */
			return madvise((void *)a, l, MADV_WILLNEED) ? -1 : 0;
		return -1;
	}
	return 0;
}

/* Checks that [vaddr, +len) is image data of pid and finds its file offset. */
static struct file_task *lookup(struct file_source *fs, uint32_t pid, uint64_t vaddr, uint64_t len, uint64_t *off,
				char *err, size_t errlen)
{
	struct file_task *t = find_task(fs, pid);

	if (!t) {
		snprintf(err, errlen, "no images for pid %u", pid);
		return NULL;
	}
	struct img_page_run run;
	if (img_lookup(t->mm, vaddr, &run)) {
		snprintf(err, errlen, "pagemap-%u.img: page 0x%llx is not in the image", pid,
			 (unsigned long long)vaddr);
		return NULL;
	}
	*off = run.off;
	if (len > run.pages * IMG_PAGE_SIZE) {
		snprintf(err, errlen, "pagemap-%u.img: 0x%llx+%llu pages crosses its entry's end", pid,
			 (unsigned long long)vaddr, (unsigned long long)(len / IMG_PAGE_SIZE));
		return NULL;
	}
	if (*off > t->pages.size || len > t->pages.size - *off) {
		snprintf(err, errlen, "pages-%u.img: offset %llu: %llu bytes wanted, file has %llu", t->pages.id,
			 (unsigned long long)*off, (unsigned long long)len, (unsigned long long)t->pages.size);
		return NULL;
	}
	return t;
}

static int file_get(struct page_source *s, uint32_t pid, uint64_t vaddr, uint64_t nr_pages, const void **data,
		    char *err, size_t errlen)
{
	uint64_t len = nr_pages * IMG_PAGE_SIZE, off;
	struct file_task *t = lookup((struct file_source *)s, pid, vaddr, len, &off, err, errlen);

	if (!t)
		return -1;
	if (populate(t->pages.base + off, len)) {
		snprintf(err, errlen, "pages-%u.img: offset %llu: can't read %llu bytes: %s", t->pages.id,
			 (unsigned long long)off, (unsigned long long)len,
			 errno == EFAULT ? "file shrank or I/O error" : strerror(errno));
		return -1;
	}
	*data = t->pages.base + off;
	return 0;
}

static int file_read(struct page_source *s, uint32_t pid, uint64_t vaddr, uint64_t nr_pages, void *buf, char *err,
		     size_t errlen)
{
	uint64_t len = nr_pages * IMG_PAGE_SIZE, off, got = 0;
	struct file_task *t = lookup((struct file_source *)s, pid, vaddr, len, &off, err, errlen);

	if (!t)
		return -1;
	while (got < len) {
		ssize_t n = pread(t->pages.fd, (uint8_t *)buf + got, len - got, (off_t)(off + got));
		if (n > 0) {
			got += (uint64_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		snprintf(err, errlen, "pages-%u.img: offset %llu: can't read %llu bytes: %s", t->pages.id,
			 (unsigned long long)(off + got), (unsigned long long)(len - got),
			 n == 0 ? "file shrank" : strerror(errno));
		return -1;
	}
	return 0;
}

static void file_destroy(struct page_source *s)
{
	struct file_source *fs = (struct file_source *)s;

	for (size_t i = 0; i < fs->nr; i++)
		img_pages_unmap(&fs->tasks[i].pages);
	free(fs->tasks);
	free(fs);
}

static const struct page_source_ops file_ops = {
    .get = file_get,
    .read = file_read,
    .destroy = file_destroy,
};

const char *page_source_kind_name(enum page_source_kind k)
{
	return k == PAGE_SOURCE_MAP ? "mmap" : k == PAGE_SOURCE_READ ? "pread" : k == PAGE_SOURCE_NET ? "net" : "auto";
}

struct page_source *file_source_open(struct img_dir *d, const struct img_mm *mms, size_t nr,
				     const struct page_source_choice *choice, struct img_err *err)
{
	struct file_source *fs = calloc(1, sizeof(*fs));

	if (!fs || !(fs->tasks = calloc(nr ? nr : 1, sizeof(fs->tasks[0])))) {
		snprintf(err->msg, sizeof(err->msg), "out of memory for the page source");
		free(fs);
		return NULL;
	}
	fs->base.ops = &file_ops;
	fs->base.choice = *choice;
	fs->base.copies = choice->kind != PAGE_SOURCE_MAP;
	for (size_t i = 0; i < nr; i++) {
		fs->tasks[i].pid = mms[i].pid;
		fs->tasks[i].mm = &mms[i];
		if (img_pages_map(d, mms[i].pages_id, &fs->tasks[i].pages, err)) {
			fs->nr = i;
			file_destroy(&fs->base);
			return NULL;
		}
		fs->nr = i + 1;
	}
	qsort(fs->tasks, fs->nr, sizeof(fs->tasks[0]), cmp_pid);
	return &fs->base;
}

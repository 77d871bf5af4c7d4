// SPDX-License-Identifier: MIT
/*
 * Unit tests of images/: a real dump of test/progs/memhog (made by the pinned
 * criu in the group setup) must read back byte for byte, and each corrupted
 * variant of it must fail with its own error naming the file and offset.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "images/image.h"
#include "mm.pb-c.h"
#include "pagemap.pb-c.h"
#include "test/progs/pattern.h"

#define WORK	TOP_DIR "/build/test-work/unit-images"
#define DUMP	WORK "/img"
#define SCRATCH WORK "/corrupt"

static struct img_task *tasks;
static size_t nr_tasks;

/* ---- helpers -------------------------------------------------------- */

static int run(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

static uint8_t *slurp(const char *path, size_t *len)
{
	struct stat st;
	uint8_t *buf;
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	buf = malloc(st.st_size + 1);
	assert_non_null(buf);
	assert_int_equal(read(fd, buf, st.st_size), st.st_size);
	close(fd);
	*len = st.st_size;
	return buf;
}

static void spit(const char *path, const uint8_t *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_TRUNC);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

static uint32_t first_pid(void)
{
	return tasks[0].pid;
}

/* A fresh copy of the dump to break. */
static void fresh_copy(void)
{
	assert_int_equal(run("rm -rf %s && cp -a %s %s", SCRATCH, DUMP, SCRATCH), 0);
}

static void scratch_path(char *out, size_t len, const char *fmt, uint32_t id)
{
	char name[64];

	snprintf(name, sizeof(name), fmt, id);
	snprintf(out, len, "%s/%s", SCRATCH, name);
}

/* Open the scratch dump and read every task fully; return the first error. */
static int read_everything(struct img_err *err)
{
	struct img_task *t = NULL;
	struct img_dir *d = NULL;
	size_t nr = 0;
	int ret = -1;

	if (img_dir_open(SCRATCH, &d, err) || img_read_pstree(d, &t, &nr, err))
		goto out;
	for (size_t i = 0; i < nr; i++) {
		struct img_mm mm;
		struct img_pages pg;

		if (t[i].state == IMG_TASK_DEAD)
			continue;
		if (img_read_mm(d, t[i].pid, &mm, err))
			goto out;
		if (mm.pages_bytes && img_pages_map(d, mm.pages_id, &pg, err)) {
			img_mm_free(&mm);
			goto out;
		}
		if (mm.pages_bytes)
			img_pages_unmap(&pg);
		img_mm_free(&mm);
	}
	ret = 0;
out:
	img_tasks_free(t, nr);
	img_dir_close(d);
	return ret;
}

static void expect_error(const char *file_fmt, uint32_t id, const char *problem)
{
	struct img_err err = {{0}};
	char file[512];

	scratch_path(file, sizeof(file), file_fmt, id);
	assert_int_equal(read_everything(&err), -1);
	print_message("    error: %s\n", err.msg);
	/* The message names the file, an offset, and this problem. */
	assert_non_null(strstr(err.msg, file));
	assert_non_null(strstr(err.msg, ": offset "));
	assert_non_null(strstr(err.msg, problem));
}

/* Header bytes before the first record: common magic + image magic. */
#define HDR 8

/*
 * Rewrite the records of an image through fn(index, unpacked-bytes, len,
 * out) which returns the new record length in out (or the same).
 */
typedef size_t (*rec_fn)(size_t idx, const uint8_t *rec, size_t len, uint8_t *out, size_t cap);

static void rewrite_records(const char *path, rec_fn fn)
{
	size_t len, pos = HDR, olen = HDR, cap;
	uint8_t *in = slurp(path, &len), *out;

	cap = len * 2 + 4096;
	out = malloc(cap);
	assert_non_null(out);
	memcpy(out, in, HDR);
	for (size_t idx = 0; pos < len; idx++) {
		uint32_t n, m;

		memcpy(&n, in + pos, 4);
		m = fn(idx, in + pos + 4, n, out + olen + 4, cap - olen - 4);
		memcpy(out + olen, &m, 4);
		olen += 4 + m;
		pos += 4 + n;
	}
	spit(path, out, olen);
	free(in);
	free(out);
}

/* pagemap records: index 0 is the head, entries follow. */
static int pm_target; /* which entry a mutation touches */
static void (*pm_mutate)(PagemapEntry *pe);

static size_t pagemap_rec(size_t idx, const uint8_t *rec, size_t len, uint8_t *out, size_t cap)
{
	PagemapEntry *pe;
	size_t n;

	if (idx == 0 || (int)idx - 1 != pm_target) {
		memcpy(out, rec, len);
		return len;
	}
	pe = pagemap_entry__unpack(NULL, len, rec);
	assert_non_null(pe);
	pm_mutate(pe);
	n = pagemap_entry__get_packed_size(pe);
	assert_true(n <= cap);
	pagemap_entry__pack(pe, out);
	pagemap_entry__free_unpacked(pe, NULL);
	return n;
}

static void mutate_pagemap(int entry, void (*fn)(PagemapEntry *))
{
	char path[512];

	pm_target = entry;
	pm_mutate = fn;
	scratch_path(path, sizeof(path), "pagemap-%u.img", first_pid());
	rewrite_records(path, pagemap_rec);
}

static size_t nr_pagemap_entries(void)
{
	struct img_err err;
	struct img_dir *d;
	struct img_mm mm;
	size_t n;

	assert_int_equal(img_dir_open(DUMP, &d, &err), 0);
	assert_int_equal(img_read_mm(d, first_pid(), &mm, &err), 0);
	n = mm.nr_pmes;
	img_mm_free(&mm);
	img_dir_close(d);
	return n;
}

/* ---- setup ---------------------------------------------------------- */

static int setup(void **state)
{
	struct img_err err;
	struct img_dir *d;

	/*
	 * The dump is made by test/lib/dump-memhog.sh, whose criu dump is bounded
	 * (test/lib/common.sh): a criu that hangs (debug registers that never
	 * fire) ends it within DUMP_BOUND seconds with one FAIL line naming the
	 * step and the last line of dump.log, printed on our stdout.
	 */
	fflush(NULL);
	if (run("CASE=test_images bash %s/test/lib/dump-memhog.sh %s -m 8 -f -t 1", TOP_DIR, WORK)) {
		fprintf(stderr, "test_images: cannot make the test dump with the pinned criu (log: %s/dump.log)\n",
			DUMP);
		return -1;
	}
	if (img_dir_open(DUMP, &d, &err) || img_read_pstree(d, &tasks, &nr_tasks, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return -1;
	}
	img_dir_close(d);
	return 0;
}

static int teardown(void **state)
{
	img_tasks_free(tasks, nr_tasks);
	return 0;
}

/* ---- the real dump reads back ---------------------------------------- */

static void test_inventory_and_pstree(void **state)
{
	struct img_inventory inv;
	struct img_err err;
	struct img_dir *d;

	assert_int_equal(img_dir_open(DUMP, &d, &err), 0);
	assert_int_equal(img_read_inventory(d, &inv, &err), 0);
	assert_int_equal(inv.img_version, 2);
	assert_true(inv.fdinfo_per_id);
	img_inventory_free(&inv);
	img_dir_close(d);

	/* memhog -f -t 1: a parent with 2 threads and its child */
	assert_int_equal(nr_tasks, 2);
	assert_int_equal(tasks[0].ppid, 0);
	assert_int_equal(tasks[1].ppid, tasks[0].pid);
	assert_int_equal(tasks[0].nr_threads, 2);
	assert_int_equal(tasks[1].nr_threads, 1);
	assert_int_equal(tasks[0].state, IMG_TASK_ALIVE);
	assert_int_equal(tasks[1].state, IMG_TASK_ALIVE);
}

/* Every word memhog wrote must be in the pages file at the offset the library gives. */
static void check_task_pages(struct img_dir *d, uint32_t pid, size_t *checked)
{
	char path[512], kind[16];
	struct img_pages pg;
	struct img_err err;
	struct img_mm mm;
	unsigned long start, len, seed;
	FILE *f;

	assert_int_equal(img_read_mm(d, pid, &mm, &err), 0);
	assert_int_equal(img_pages_map(d, mm.pages_id, &pg, &err), 0);
	assert_true(pg.size >= mm.pages_bytes);

	snprintf(path, sizeof(path), "%s/manifest.%u", WORK, pid);
	f = fopen(path, "r");
	assert_non_null(f);
	while (fscanf(f, "%lx %lu %lu %15s", &start, &len, &seed, kind) == 4) {
		for (uint64_t a = start; a < start + len; a += IMG_PAGE_SIZE) {
			bool written = !strcmp(kind, "pattern") ||
				       (!strcmp(kind, "holes") && ((a - start) / IMG_PAGE_SIZE) % 2 == 0);
			uint64_t off;
			int r = img_page_offset(&mm, a, &off);

			assert_true(img_find_vma(&mm, a) >= 0);
			if (!written) {
				/* never touched or zero-written: absent, or present and zero */
				if (r == 0)
					for (size_t w = 0; w < IMG_PAGE_SIZE; w += 8)
						assert_true(*(const uint64_t *)(pg.base + off + w) == 0);
				continue;
			}
			if (r != 0)
				fail_msg("task %u: page %#lx of %s region is not in the dump", pid, (unsigned long)a,
					 kind);
			assert_true(off + IMG_PAGE_SIZE <= pg.size);
			for (size_t w = 0; w < IMG_PAGE_SIZE; w += 8) {
				uint64_t got = *(const uint64_t *)(pg.base + off + w);

				if (got != pattern_word(a + w, seed))
					fail_msg("task %u: word %#lx reads %#lx from the image, want %#lx", pid,
						 (unsigned long)(a + w), (unsigned long)got,
						 (unsigned long)pattern_word(a + w, seed));
			}
			(*checked)++;
		}
	}
	fclose(f);

	/* Lazy pages only ever sit in lazy-capable VMAs. */
	for (size_t i = 0; i < mm.nr_pmes; i++) {
		if (!(mm.pmes[i].flags & IMG_PE_LAZY))
			continue;
		for (uint64_t a = mm.pmes[i].vaddr; a < mm.pmes[i].vaddr + mm.pmes[i].nr_pages * IMG_PAGE_SIZE;
		     a += IMG_PAGE_SIZE) {
			long v = img_find_vma(&mm, a);

			assert_true(v >= 0);
			assert_true(img_vma_can_be_lazy(&mm.vmas[v]));
		}
	}
	img_pages_unmap(&pg);
	img_mm_free(&mm);
}

static void test_every_page_matches(void **state)
{
	struct img_err err;
	struct img_dir *d;
	size_t checked = 0;

	assert_int_equal(img_dir_open(DUMP, &d, &err), 0);
	for (size_t i = 0; i < nr_tasks; i++)
		check_task_pages(d, tasks[i].pid, &checked);
	img_dir_close(d);
	print_message("    %zu written pages verified across %zu tasks\n", checked, nr_tasks);
	/* 8 MiB big + 2 MiB of holes + 1 MiB ro + 256 KiB heap per task */
	assert_true(checked >= 2 * (2048 + 512 + 256 + 64));
}

static void test_lookup_outside(void **state)
{
	struct img_err err;
	struct img_dir *d;
	struct img_mm mm;
	uint64_t off;

	assert_int_equal(img_dir_open(DUMP, &d, &err), 0);
	assert_int_equal(img_read_mm(d, first_pid(), &mm, &err), 0);
	assert_int_equal(img_find_vma(&mm, 0), -1);
	assert_int_equal(img_page_offset(&mm, 0, &off), -1);
	assert_int_equal(img_find_pme(&mm, mm.vmas[mm.nr_vmas - 1].end), -1);
	img_mm_free(&mm);
	img_dir_close(d);
}

/* ---- corrupted variants ---------------------------------------------- */

static void overwrite(const char *fmt, uint32_t id, size_t off, const void *bytes, size_t n)
{
	char path[512];
	size_t len;
	uint8_t *buf;

	scratch_path(path, sizeof(path), fmt, id);
	buf = slurp(path, &len);
	assert_true(off + n <= len);
	memcpy(buf + off, bytes, n);
	spit(path, buf, len);
	free(buf);
}

static void resize(const char *fmt, uint32_t id, long delta)
{
	char path[512];
	struct stat st;

	scratch_path(path, sizeof(path), fmt, id);
	assert_int_equal(stat(path, &st), 0);
	if (delta > 0) {
		int fd = open(path, O_WRONLY | O_APPEND);

		assert_true(fd >= 0);
		assert_int_equal(write(fd, "\x07\x00", delta), delta);
		close(fd);
	} else {
		assert_int_equal(truncate(path, st.st_size + delta), 0);
	}
}

static void test_inventory_bad_magic(void **state)
{
	uint32_t bad = 0xdeadbeef;

	fresh_copy();
	overwrite("inventory.img", 0, 0, &bad, 4);
	expect_error("inventory.img", 0, "bad image magic 0xdeadbeef");
}

static void test_pstree_truncated(void **state)
{
	fresh_copy();
	resize("pstree.img", 0, -3);
	expect_error("pstree.img", 0, "runs past the end of the file");
}

static void test_pstree_huge_length(void **state)
{
	uint32_t huge = 0xfffffff0;

	fresh_copy();
	overwrite("pstree.img", 0, HDR, &huge, 4);
	expect_error("pstree.img", 0, "exceeds the");
}

static void test_pstree_garbage(void **state)
{
	uint8_t junk[6];

	memset(junk, 0xff, sizeof(junk));
	fresh_copy();
	overwrite("pstree.img", 0, HDR + 4, junk, sizeof(junk));
	expect_error("pstree.img", 0, "malformed pstree_entry");
}

static void test_mm_bad_common_magic(void **state)
{
	uint32_t bad = 0x11111111;

	fresh_copy();
	overwrite("mm-%u.img", first_pid(), 0, &bad, 4);
	expect_error("mm-%u.img", first_pid(), "bad common magic");
}

static void test_core_missing(void **state)
{
	char path[512];

	fresh_copy();
	scratch_path(path, sizeof(path), "core-%u.img", tasks[1].pid);
	assert_int_equal(unlink(path), 0);
	expect_error("core-%u.img", tasks[1].pid, "cannot open: No such file");
}

static uint64_t saved_vaddr;

static void pe_save_vaddr(PagemapEntry *pe)
{
	saved_vaddr = pe->vaddr;
}
static void pe_set_saved_vaddr(PagemapEntry *pe)
{
	pe->vaddr = saved_vaddr;
}
static void pe_unalign(PagemapEntry *pe)
{
	pe->vaddr += 8;
}
static void pe_zero_pages(PagemapEntry *pe)
{
	pe->nr_pages = 0;
}
static void pe_unknown_flag(PagemapEntry *pe)
{
	pe->has_flags = 1;
	pe->flags |= 0x80;
}
static void pe_huge(PagemapEntry *pe)
{
	pe->nr_pages = 0x1000000; /* 64 GiB: past any VMA of memhog */
}
static void pe_grow_one(PagemapEntry *pe)
{
	pe->nr_pages += 1;
}
static void pe_none(PagemapEntry *pe)
{
}

static void test_pagemap_unsorted(void **state)
{
	fresh_copy();
	/* entry 2 takes entry 0's address: out of order */
	mutate_pagemap(0, pe_save_vaddr);
	mutate_pagemap(2, pe_set_saved_vaddr);
	expect_error("pagemap-%u.img", first_pid(), "is out of order");
}

static void test_pagemap_overlap(void **state)
{
	size_t n = nr_pagemap_entries();
	struct img_err err;
	struct img_dir *d;
	struct img_mm mm;
	long target = -1;

	/* find two entries that touch (end of i == start of i+1), then grow i into i+1 */
	assert_int_equal(img_dir_open(DUMP, &d, &err), 0);
	assert_int_equal(img_read_mm(d, first_pid(), &mm, &err), 0);
	for (size_t i = 0; i + 1 < n && target < 0; i++)
		if (mm.pmes[i].vaddr + mm.pmes[i].nr_pages * IMG_PAGE_SIZE > mm.pmes[i + 1].vaddr - IMG_PAGE_SIZE)
			target = i;
	img_mm_free(&mm);
	img_dir_close(d);
	if (target < 0)
		skip();
	fresh_copy();
	mutate_pagemap(target, pe_grow_one);
	mutate_pagemap(target, pe_grow_one);
	expect_error("pagemap-%u.img", first_pid(), "overlaps the one before");
}

static void test_pagemap_unaligned(void **state)
{
	fresh_copy();
	mutate_pagemap(1, pe_unalign);
	expect_error("pagemap-%u.img", first_pid(), "is not page-aligned");
}

static void test_pagemap_zero_pages(void **state)
{
	fresh_copy();
	mutate_pagemap(1, pe_zero_pages);
	expect_error("pagemap-%u.img", first_pid(), "has 0 pages");
}

static void test_pagemap_unknown_flags(void **state)
{
	fresh_copy();
	mutate_pagemap(1, pe_unknown_flag);
	expect_error("pagemap-%u.img", first_pid(), "unknown flags");
}

static void test_pagemap_outside_vmas(void **state)
{
	fresh_copy();
	mutate_pagemap((int)nr_pagemap_entries() - 1, pe_huge);
	expect_error("pagemap-%u.img", first_pid(), "is not inside the task's VMAs");
}

static void test_pagemap_trailing_bytes(void **state)
{
	fresh_copy();
	mutate_pagemap(0, pe_none); /* a plain rewrite is harmless... */
	assert_int_equal(read_everything(&(struct img_err){{0}}), 0);
	resize("pagemap-%u.img", first_pid(), 2); /* ...two stray bytes are not */
	expect_error("pagemap-%u.img", first_pid(), "truncated record");
}

static void test_pagemap_empty(void **state)
{
	char path[512];

	fresh_copy();
	scratch_path(path, sizeof(path), "pagemap-%u.img", first_pid());
	assert_int_equal(truncate(path, 0), 0);
	expect_error("pagemap-%u.img", first_pid(), "truncated: no magic");
}

static void test_pages_too_short(void **state)
{
	struct img_err err;
	struct img_dir *d;
	struct img_mm mm;
	uint32_t pages_id;

	assert_int_equal(img_dir_open(DUMP, &d, &err), 0);
	assert_int_equal(img_read_mm(d, first_pid(), &mm, &err), 0);
	pages_id = mm.pages_id;
	img_mm_free(&mm);
	img_dir_close(d);

	fresh_copy();
	resize("pages-%u.img", pages_id, -4096);
	/* the error is the pagemap's: it points past the end of its pages file */
	expect_error("pagemap-%u.img", first_pid(), "which has only");
}

static void test_pages_missing(void **state)
{
	char path[512];

	fresh_copy();
	assert_int_equal(run("rm -f %s/pages-*.img", SCRATCH), 0);
	scratch_path(path, sizeof(path), "pagemap-%u.img", first_pid());
	expect_error("pagemap-%u.img", first_pid(), "its pages file");
}

static size_t mm_overlap_rec(size_t idx, const uint8_t *rec, size_t len, uint8_t *out, size_t cap)
{
	MmEntry *me = mm_entry__unpack(NULL, len, rec);
	size_t n;

	assert_non_null(me);
	assert_true(me->n_vmas > 2);
	me->vmas[2]->start = me->vmas[1]->start;
	n = mm_entry__get_packed_size(me);
	assert_true(n <= cap);
	mm_entry__pack(me, out);
	mm_entry__free_unpacked(me, NULL);
	return n;
}

static void test_mm_vma_overlap(void **state)
{
	char path[512];

	fresh_copy();
	scratch_path(path, sizeof(path), "mm-%u.img", first_pid());
	rewrite_records(path, mm_overlap_rec);
	expect_error("mm-%u.img", first_pid(), "overlaps or precedes VMA 1");
}

static void test_not_a_dir(void **state)
{
	struct img_err err;
	struct img_dir *d;

	assert_int_equal(img_dir_open(WORK "/no-such-dir", &d, &err), -1);
	assert_non_null(strstr(err.msg, "no-such-dir: offset 0: cannot open image directory"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_inventory_and_pstree),
	    cmocka_unit_test(test_every_page_matches),
	    cmocka_unit_test(test_lookup_outside),
	    cmocka_unit_test(test_inventory_bad_magic),
	    cmocka_unit_test(test_pstree_truncated),
	    cmocka_unit_test(test_pstree_huge_length),
	    cmocka_unit_test(test_pstree_garbage),
	    cmocka_unit_test(test_mm_bad_common_magic),
	    cmocka_unit_test(test_mm_vma_overlap),
	    cmocka_unit_test(test_core_missing),
	    cmocka_unit_test(test_pagemap_unsorted),
	    cmocka_unit_test(test_pagemap_overlap),
	    cmocka_unit_test(test_pagemap_unaligned),
	    cmocka_unit_test(test_pagemap_zero_pages),
	    cmocka_unit_test(test_pagemap_unknown_flags),
	    cmocka_unit_test(test_pagemap_outside_vmas),
	    cmocka_unit_test(test_pagemap_trailing_bytes),
	    cmocka_unit_test(test_pagemap_empty),
	    cmocka_unit_test(test_pages_too_short),
	    cmocka_unit_test(test_pages_missing),
	    cmocka_unit_test(test_not_a_dir),
	};

	return cmocka_run_group_tests_name("images", tests, setup, teardown);
}

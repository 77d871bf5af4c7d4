// SPDX-License-Identifier: MIT
/*
 * fuzz_images: the image reader over a whole dump directory built from the
 * fuzzer's input (framing in frame.h).  Beyond "no crash", whatever the
 * reader calls OK must hold the promises of images/image.h; any broken
 * promise abort()s with a line saying which.
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "images/image.h"
#include "plugin/engine/ranges.h"
#include "test/fuzz/fuzz.h"
#include "test/fuzz/frame.h"

#define MAX_TASKS     16 /* tasks whose mm is read per input */
#define MAX_TOUCHES   256
#define RANDOM_PROBES 64

static char scratch[256];
static int scratch_fd = -1;
static char written[FZ_MAX_RECORDS][64];
static int nr_written;
static bool verbose; /* FUZZ_VERBOSE=1: say what the reader said, to debug an input */

/* ---- the scratch dump directory, reused by every input --------------- */

static void remove_written(void)
{
	for (int i = 0; i < nr_written; i++)
		if (unlinkat(scratch_fd, written[i], 0) < 0 && errno != ENOENT)
			fatal("unlink %s/%s: %s", scratch, written[i], strerror(errno));
	nr_written = 0;
}

static void remove_scratch(void)
{
	remove_written();
	close(scratch_fd);
	if (rmdir(scratch) < 0)
		fprintf(stderr, "fuzz_images: rmdir %s: %s\n", scratch, strerror(errno));
}

static void write_all_at(int fd, const char *name, const uint8_t *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = pwrite(fd, buf + done, len - done, done);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			fatal("write %s/%s: %s", scratch, name, r < 0 ? strerror(errno) : "short write");
		done += r;
	}
}

static void write_record(const struct fz_record *r)
{
	char name[64];
	int fd;

	fz_name(r, name, sizeof(name));
	fd = openat(scratch_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		fatal("create %s/%s: %s", scratch, name, strerror(errno));
	if (r->kind == FZ_PAGES) {
		if (ftruncate(fd, (off_t)fz_pages_size(r)) < 0)
			fatal("truncate %s/%s: %s", scratch, name, strerror(errno));
	} else {
		write_all_at(fd, name, r->data, r->len);
	}
	if (close(fd) < 0)
		fatal("close %s/%s: %s", scratch, name, strerror(errno));
	/* A name written twice keeps its last contents and is unlinked once. */
	for (int i = 0; i < nr_written; i++)
		if (!strcmp(written[i], name))
			return;
	memcpy(written[nr_written++], name, sizeof(name));
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *base = getenv("FUZZ_SCRATCH");

	if (!base)
		base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(scratch, sizeof(scratch), "%s/lazyrestore-fuzz.XXXXXX", base);
	if (!mkdtemp(scratch))
		fatal("mkdtemp %s: %s", scratch, strerror(errno));
	scratch_fd = open(scratch, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (scratch_fd < 0)
		fatal("open %s: %s", scratch, strerror(errno));
	atexit(remove_scratch);
	verbose = getenv("FUZZ_VERBOSE") != NULL;
	return 0;
}

/* ---- invariants ------------------------------------------------------ */

static void report(const char *what, const struct img_err *err)
{
	if (verbose)
		fprintf(stderr, "fuzz_images: %s: %s\n", what, err ? err->msg : "OK");
}

static uint64_t pme_end(const struct img_pme *p)
{
	return p->vaddr + ((uint64_t)p->nr_pages << IMG_PAGE_SHIFT);
}

static void check_vmas(const struct img_mm *mm)
{
	for (size_t i = 0; i < mm->nr_vmas; i++) {
		const struct img_vma *v = &mm->vmas[i];

		if ((v->start | v->end) % IMG_PAGE_SIZE || v->start >= v->end)
			violation("task %u: VMA %zu %#llx-%#llx is unaligned or empty", mm->pid, i,
				  (unsigned long long)v->start, (unsigned long long)v->end);
		if (i && v->start < mm->vmas[i - 1].end)
			violation("task %u: VMA %zu starts at %#llx before VMA %zu ends (%#llx)", mm->pid, i,
				  (unsigned long long)v->start, i - 1, (unsigned long long)mm->vmas[i - 1].end);
	}
}

/* Independent of the reader's own cursor walk: a linear scan for the VMA holding addr. */
static long vma_holding(const struct img_mm *mm, uint64_t addr)
{
	for (size_t i = 0; i < mm->nr_vmas; i++)
		if (addr >= mm->vmas[i].start && addr < mm->vmas[i].end)
			return i;
	return -1;
}

static void check_inside_vmas(const struct img_mm *mm, size_t i)
{
	const struct img_pme *p = &mm->pmes[i];
	uint64_t a = p->vaddr, end = pme_end(p);
	long v = vma_holding(mm, a);

	for (;;) {
		if (v < 0)
			violation("task %u: pagemap entry %zu (%#llx-%#llx): %#llx is in no VMA", mm->pid, i,
				  (unsigned long long)p->vaddr, (unsigned long long)end, (unsigned long long)a);
		if (mm->vmas[v].end >= end)
			return;
		a = mm->vmas[v].end;
		v = (size_t)v + 1 < mm->nr_vmas && mm->vmas[v + 1].start == a ? v + 1 : -1;
	}
}

static void check_pmes(const struct img_mm *mm, uint64_t pages_size)
{
	const uint32_t known = IMG_PE_PARENT | IMG_PE_LAZY | IMG_PE_PRESENT;
	uint64_t next_off = 0;

	for (size_t i = 0; i < mm->nr_pmes; i++) {
		const struct img_pme *p = &mm->pmes[i];
		uint64_t len = (uint64_t)p->nr_pages << IMG_PAGE_SHIFT;

		if (p->vaddr % IMG_PAGE_SIZE || !p->nr_pages || p->vaddr + len < p->vaddr)
			violation("task %u: pagemap entry %zu at %#llx, %u pages: unaligned, empty or wrapping",
				  mm->pid, i, (unsigned long long)p->vaddr, p->nr_pages);
		if (!(p->flags & known) || (p->flags & ~known))
			violation("task %u: pagemap entry %zu has flags %#x", mm->pid, i, p->flags);
		if (i && p->vaddr < pme_end(&mm->pmes[i - 1]))
			violation("task %u: pagemap entry %zu at %#llx overlaps or precedes entry %zu", mm->pid, i,
				  (unsigned long long)p->vaddr, i - 1);
		check_inside_vmas(mm, i);
		if (!(p->flags & IMG_PE_PRESENT))
			continue;
		/* CRIU writes the present pages back to back, in pagemap order. */
		if (p->file_off != next_off)
			violation("task %u: pagemap entry %zu at file offset %llu, want %llu", mm->pid, i,
				  (unsigned long long)p->file_off, (unsigned long long)next_off);
		if (p->file_off + len > pages_size)
			violation("task %u: pagemap entry %zu needs bytes up to %llu of a %llu-byte pages file",
				  mm->pid, i, (unsigned long long)(p->file_off + len), (unsigned long long)pages_size);
		next_off += len;
	}
	if (next_off != mm->pages_bytes)
		violation("task %u: pages_bytes %llu, entries add up to %llu", mm->pid,
			  (unsigned long long)mm->pages_bytes, (unsigned long long)next_off);
}

/* The entry holding addr by a linear scan, or -1. */
static long pme_holding(const struct img_mm *mm, uint64_t addr)
{
	for (size_t i = 0; i < mm->nr_pmes; i++)
		if (addr >= mm->pmes[i].vaddr && addr < pme_end(&mm->pmes[i]))
			return i;
	return -1;
}

/* img_find_pme, img_page_offset and img_find_vma agree with each other and with want_pme/want_vma. */
static void check_lookup(const struct img_mm *mm, uint64_t addr, long want_pme, long want_vma, uint64_t pages_size)
{
	long i = img_find_pme(mm, addr), v = img_find_vma(mm, addr);
	uint64_t off = 0;
	int r = img_page_offset(mm, addr, &off);

	if (i != want_pme || v != want_vma)
		violation("task %u: %#llx: img_find_pme %ld (want %ld), img_find_vma %ld (want %ld)", mm->pid,
			  (unsigned long long)addr, i, want_pme, v, want_vma);
	if (i >= 0 && v < 0)
		violation("task %u: %#llx is in pagemap entry %ld but in no VMA", mm->pid, (unsigned long long)addr, i);
	if (r == 0 && (i < 0 || !(mm->pmes[i].flags & IMG_PE_PRESENT)))
		violation("task %u: img_page_offset(%#llx) found a page that no present entry holds", mm->pid,
			  (unsigned long long)addr);
	if (r != 0 && i >= 0 && (mm->pmes[i].flags & IMG_PE_PRESENT))
		violation("task %u: img_page_offset(%#llx) missed present entry %ld", mm->pid, (unsigned long long)addr,
			  i);
	if (r == 0 && (off % IMG_PAGE_SIZE || off + IMG_PAGE_SIZE > pages_size ||
		       off != mm->pmes[i].file_off + (addr / IMG_PAGE_SIZE * IMG_PAGE_SIZE - mm->pmes[i].vaddr)))
		violation("task %u: img_page_offset(%#llx) = %llu, pages file has %llu bytes", mm->pid,
			  (unsigned long long)addr, (unsigned long long)off, (unsigned long long)pages_size);
}

/* Lookups at every entry's edges (expected results from sortedness) and at pseudo-random addresses. */
static void check_lookups(const struct img_mm *mm, uint64_t seed, uint64_t pages_size)
{
	for (size_t i = 0; i < mm->nr_pmes; i++) {
		const struct img_pme *p = &mm->pmes[i];
		uint64_t end = pme_end(p);
		long next = i + 1 < mm->nr_pmes && mm->pmes[i + 1].vaddr == end ? (long)i + 1 : -1;

		check_lookup(mm, p->vaddr, i, img_find_vma(mm, p->vaddr), pages_size);
		check_lookup(mm, end - 1, i, img_find_vma(mm, end - 1), pages_size);
		if (img_find_vma(mm, p->vaddr) < 0 || img_find_vma(mm, end - 1) < 0)
			violation("task %u: pagemap entry %zu edges are outside the VMAs", mm->pid, i);
		if (end)
			check_lookup(mm, end, next, img_find_vma(mm, end), pages_size);
	}
	for (size_t i = 0; i < mm->nr_vmas; i++) {
		const struct img_vma *v = &mm->vmas[i];

		if (img_find_vma(mm, v->start) != (long)i || img_find_vma(mm, v->end - 1) != (long)i)
			violation("task %u: img_find_vma misses VMA %zu at its edges", mm->pid, i);
	}
	for (int k = 0; k < RANDOM_PROBES; k++) {
		uint64_t addr;

		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		addr = seed;
		/* Most probes land near the mapped range, where the answers are interesting. */
		if (mm->nr_vmas && k % 4)
			addr = mm->vmas[0].start + (seed >> 16) % (mm->vmas[mm->nr_vmas - 1].end - mm->vmas[0].start);
		check_lookup(mm, addr, pme_holding(mm, addr), vma_holding(mm, addr), pages_size);
	}
}

/* Every byte the pagemap points at is readable in the mapped pages file (SIGBUS otherwise). */
static void touch_pages(const struct img_mm *mm, const struct img_pages *pg)
{
	volatile uint8_t sink = 0;
	int touched = 0;

	for (size_t i = 0; i < mm->nr_pmes && touched < MAX_TOUCHES; i++) {
		const struct img_pme *p = &mm->pmes[i];

		if (!(p->flags & IMG_PE_PRESENT))
			continue;
		sink ^= pg->base[p->file_off];
		sink ^= pg->base[p->file_off + ((uint64_t)p->nr_pages << IMG_PAGE_SHIFT) - 1];
		touched++;
	}
	(void)sink;
}

/*
 * The engine's lazy ranges built from what the reader accepted: exactly the
 * PE_LAZY pages, sorted, each inside one VMA that can be lazy.
 */
static void check_ranges(const struct img_mm *mm, uint64_t seed)
{
	uint64_t lazy_pages = 0, pages = 0;
	struct lr_ranges r;
	struct lr_range c;
	char err[256];

	lr_ranges_init(&r);
	if (lr_ranges_build(&r, mm, err, sizeof(err))) {
		if (verbose)
			fprintf(stderr, "fuzz_images: lr_ranges_build: %s\n", err);
		lr_ranges_free(&r);
		return;
	}
	for (size_t i = 0; i < mm->nr_pmes; i++)
		if (mm->pmes[i].flags & IMG_PE_LAZY)
			lazy_pages += mm->pmes[i].nr_pages;
	uint64_t prev_end = 0;
	for (size_t i = 0; i < r.nr; i++) {
		const struct lr_range *g = lr_ranges_nth(&r, i);
		/* The lookups were checked against linear scans above; here they keep this linear. */
		long v = img_find_vma(mm, g->start), p;
		uint64_t a = g->start;

		if (g->start >= g->end || (g->start | g->end) % IMG_PAGE_SIZE || g->img != g->start ||
		    (i && g->start < prev_end))
			violation("task %u: lazy range %zu %#llx-%#llx (img %#llx) is empty, unaligned or unsorted",
				  mm->pid, i, (unsigned long long)g->start, (unsigned long long)g->end,
				  (unsigned long long)g->img);
		if (v < 0 || g->end > mm->vmas[v].end || !img_vma_can_be_lazy(&mm->vmas[v]))
			violation("task %u: lazy range %zu %#llx-%#llx is not inside one lazy VMA", mm->pid, i,
				  (unsigned long long)g->start, (unsigned long long)g->end);
		/* every page of the range is a PE_LAZY page of the pagemap */
		while (a < g->end) {
			p = img_find_pme(mm, a);
			if (p < 0 || !(mm->pmes[p].flags & IMG_PE_LAZY))
				violation("task %u: lazy range %zu holds %#llx, which is no lazy page", mm->pid, i,
					  (unsigned long long)a);
			a = pme_end(&mm->pmes[p]);
		}
		pages += (g->end - g->start) / IMG_PAGE_SIZE;
		prev_end = g->end;
	}
	if (pages != r.pages || pages != lazy_pages)
		violation("task %u: lazy ranges hold %llu pages, say %llu, the pagemap has %llu lazy", mm->pid,
			  (unsigned long long)pages, (unsigned long long)r.pages, (unsigned long long)lazy_pages);
	if (r.nr &&
	    (lr_ranges_pick(&r, seed & ~(IMG_PAGE_SIZE - 1), 64 * IMG_PAGE_SIZE, &c) || !lr_ranges_get(&r, c.start) ||
	     c.start >= c.end || c.end - c.start > 64 * IMG_PAGE_SIZE || c.end > lr_ranges_get(&r, c.start)->end))
		violation("task %u: lr_ranges_pick gave %#llx-%#llx, not a piece of one range", mm->pid,
			  (unsigned long long)c.start, (unsigned long long)c.end);
	if (verbose)
		fprintf(stderr, "fuzz_images: lr_ranges_build: OK, %zu ranges, %llu pages\n", r.nr,
			(unsigned long long)r.pages);
	lr_ranges_free(&r);
}

static void check_mm(struct img_dir *d, uint32_t pid, uint64_t seed)
{
	struct img_pages pg = {.fd = -1};
	struct img_err err;
	struct img_mm mm;

	if (img_read_mm(d, pid, &mm, &err))
		return report("img_read_mm", &err);
	report("img_read_mm", NULL);
	if (mm.pid != pid)
		violation("img_read_mm(%u) returned task %u", pid, mm.pid);
	check_vmas(&mm);
	if (mm.pages_bytes) {
		if (img_pages_map(d, mm.pages_id, &pg, &err))
			violation("task %u: reader said OK but pages-%u.img does not map: %s", pid, mm.pages_id,
				  err.msg);
		check_pmes(&mm, pg.size);
		check_lookups(&mm, seed, pg.size);
		check_ranges(&mm, seed);
		touch_pages(&mm, &pg);
		img_pages_unmap(&pg);
	} else {
		check_pmes(&mm, 0);
		check_lookups(&mm, seed, 0);
		check_ranges(&mm, seed);
	}
	img_mm_free(&mm);
}

static void check_tasks(const struct img_task *t, size_t nr)
{
	if (!nr)
		violation("img_read_pstree returned no tasks");
	if (t[0].ppid != 0)
		violation("root task %u has parent %u", t[0].pid, t[0].ppid);
	for (size_t i = 0; i < nr; i++) {
		size_t j;

		if (t[i].pid == 0 ||
		    (t[i].state != IMG_TASK_ALIVE && t[i].state != IMG_TASK_DEAD && t[i].state != IMG_TASK_STOPPED))
			violation("task %zu: pid %u, state %d", i, t[i].pid, t[i].state);
		if (t[i].nr_threads && !t[i].threads)
			violation("task %u: %zu threads without an array", t[i].pid, t[i].nr_threads);
		for (j = 0; j < i && t[j].pid != t[i].pid; j++)
			;
		if (j < i)
			violation("pid %u listed twice", t[i].pid);
		for (j = 0; i && j < i && t[j].pid != t[i].ppid; j++)
			;
		if (i && j == i)
			violation("task %u: parent %u not listed before it", t[i].pid, t[i].ppid);
	}
}

static void check_inventory(struct img_dir *d)
{
	struct img_inventory inv;
	struct img_err err;

	if (img_read_inventory(d, &inv, &err))
		violation("img_dir_open read the inventory, a second read fails: %s", err.msg);
	if (inv.img_version != 1 && inv.img_version != 2)
		violation("inventory img_version %u", inv.img_version);
	for (size_t i = 0; i < inv.nr_plugins; i++)
		if (!inv.plugins[i])
			violation("inventory plugin %zu is NULL", i);
	img_inventory_free(&inv);
}

static uint64_t hash(const uint8_t *data, size_t size)
{
	uint64_t h = 14695981039346656037ULL;

	for (size_t i = 0; i < size; i++)
		h = (h ^ data[i]) * 1099511628211ULL;
	return h;
}

static void read_dump(const uint8_t *data, size_t size)
{
	struct img_task *tasks = NULL;
	size_t nr = 0, pos = 0;
	struct fz_record r;
	struct img_err err;
	struct img_dir *d;
	uint64_t seed = hash(data, size);

	if (img_dir_open(scratch, &d, &err))
		return report("img_dir_open", &err);
	check_inventory(d);
	if (img_read_pstree(d, &tasks, &nr, &err)) {
		report("img_read_pstree", &err);
	} else {
		report("img_read_pstree", NULL);
		check_tasks(tasks, nr);
		for (size_t i = 0; i < nr && i < MAX_TASKS; i++)
			check_mm(d, tasks[i].pid, seed + i);
		img_tasks_free(tasks, nr);
	}
	/* Every mm file is read too, so a broken pstree does not hide the mm reader. */
	for (int n = 0; n < FZ_MAX_RECORDS && fz_next(data, size, &pos, &r); n++)
		if (r.kind == FZ_MM)
			check_mm(d, r.id, seed ^ r.id);
	img_dir_close(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_record r;
	size_t pos = 0;

	while (nr_written < FZ_MAX_RECORDS && fz_next(data, size, &pos, &r))
		write_record(&r);
	read_dump(data, size);
	remove_written();
	return 0;
}

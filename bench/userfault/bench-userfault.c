// SPDX-License-Identifier: MIT
/*
 * bench-userfault: what one page costs to bring in, by each way libuserfault
 * offers, against plain first touch of anonymous memory, in one run.
 *
 *   bench-userfault [-n PAGES] [-r REPS]     (defaults 16384 pages, 5 reps)
 *
 * Every method writes (or, in the "read" rows, reads) one byte of each page
 * of a fresh region, in order:
 *   first touch          ordinary anonymous memory: the kernel allocates and
 *                        zeroes a page
 *   SIGBUS + MOVE        uf_madvise_userfault(); the SIGBUS handler moves the
 *                        page (CHUNK at a time) from a pre-filled source with
 *                        uf_remap_anon_pages(): no allocation, no copy
 *   thread + COPY        uf_handler_thread(); the fill callback hands back the
 *                        pre-filled source page, UFFDIO_COPY allocates and
 *                        copies it
 * The read rows show what a write fault costs extra on an armed range: the
 * kernel allocates and zeroes a page (2 MiB for a THP range) before it sees
 * the range is armed, then drops it.
 * Sources are filled before the clock starts: the table is the cost of the
 * mechanism, not of producing the bytes.  After each run every page is
 * checked to hold its source's bytes.  Methods take turns run by run.
 * Printed, in ns per 4 KiB page: median, min and max of REPS wall-clock
 * runs, the median of the process's CPU time (the fault thread's included),
 * and each median's ratio to first touch.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "lib/userfault/userfault.h"

#define HPAGE	 (2UL << 20)
#define MAX_REPS 101

static size_t ps;

static struct {
	char *dst, *src;
	size_t len, chunk;
	bool read; /* touch by reading instead of writing */
} g;

struct sample {
	double wall, cpu; /* ns */
};

static double now_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "bench-userfault: %s: %s\n", what, strerror(errno));
	exit(1);
}

static char *map_aligned(size_t len, bool huge)
{
	size_t span = len + HPAGE;
	char *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *a;

	if (p == MAP_FAILED)
		die("mmap");
	a = (char *)(((uintptr_t)p + HPAGE - 1) & ~(HPAGE - 1));
	if ((a > p && munmap(p, (size_t)(a - p))) || munmap(a + len, (size_t)(p + span - a - len)))
		die("munmap");
	if (madvise(a, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE))
		die("madvise");
	return a;
}

/* A source whose every page is present and says which page it is. */
static char *make_source(size_t len, bool huge)
{
	char *s = map_aligned(len, huge);
	size_t off;

	for (off = 0; off < len; off += ps)
		*(uint64_t *)(s + off) = off + 1;
	return s;
}

static void check_dst(const char *method)
{
	size_t off;

	for (off = 0; off < g.len; off += ps)
		if (*(uint64_t *)(g.dst + off) != (g.read ? off + 1 : ((off + 1) & ~0xffULL) + 0x5a)) {
			fprintf(stderr, "bench-userfault: %s: page at offset %zu has wrong bytes\n", method, off);
			exit(1);
		}
}

/* Wall time, and CPU time of the whole process (the fault thread's too). */
static struct sample touch_all(char *p, size_t len)
{
	double w0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
	size_t off;

	for (off = 0; off < len; off += ps)
		if (g.read)
			(void)((volatile char *)p)[off];
		else
			((volatile char *)p)[off] = 0x5a;
	return (struct sample){now_ns(CLOCK_MONOTONIC) - w0, now_ns(CLOCK_PROCESS_CPUTIME_ID) - c0};
}

static struct sample run_first_touch(void)
{
	char *p = map_aligned(g.len, false);
	struct sample t = touch_all(p, g.len);

	munmap(p, g.len);
	return t;
}

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	size_t off = ((size_t)((char *)si->si_addr - g.dst)) & ~(g.chunk - 1);

	if (uf_remap_anon_pages(g.dst + off, g.src + off, g.chunk) < 0) {
		const char *e = uf_last_error();

		if (write(STDERR_FILENO, e, strlen(e)) < 0 || write(STDERR_FILENO, "\n", 1) < 0)
			_exit(1);
		_exit(1);
	}
}

static struct sample run_sigbus_move(void)
{
	bool huge = g.chunk >= HPAGE;
	struct sample t;

	g.src = make_source(g.len, huge);
	g.dst = map_aligned(g.len, huge);
	if (uf_madvise_userfault(g.dst, g.len))
		die(uf_last_error());
	t = touch_all(g.dst, g.len);
	check_dst("SIGBUS + MOVE");
	munmap(g.dst, g.len);
	munmap(g.src, g.len);
	return t;
}

static const void *fill_from_src(void *page, void *buf, void *arg)
{
	return g.src + ((char *)page - g.dst);
}

static struct sample run_thread_copy(void)
{
	struct uf_handler *h;
	struct sample t;

	g.src = make_source(g.len, false);
	g.dst = map_aligned(g.len, false);
	h = uf_handler_thread(g.dst, g.len, fill_from_src, NULL);
	if (!h)
		die(uf_last_error());
	t = touch_all(g.dst, g.len);
	if (uf_handler_stop(h, NULL))
		die(uf_last_error());
	check_dst("thread + COPY");
	munmap(g.dst, g.len);
	munmap(g.src, g.len);
	return t;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

struct row {
	const char *name;
	struct sample (*run)(void);
	size_t chunk;
	bool read;
	double wall[MAX_REPS], cpu[MAX_REPS]; /* ns per page, one per rep */
};

/* Methods take turns rep by rep, so a slow moment of the machine does not
 * fall on one method only. */
static void measure(struct row *rows, size_t nrows, int reps, size_t pages)
{
	size_t i;
	int r;

	for (r = 0; r < reps; r++)
		for (i = 0; i < nrows; i++) {
			struct sample t;

			g.chunk = rows[i].chunk;
			g.read = rows[i].read;
			t = rows[i].run();
			rows[i].wall[r] = t.wall / (double)pages;
			rows[i].cpu[r] = t.cpu / (double)pages;
		}
	for (i = 0; i < nrows; i++) {
		qsort(rows[i].wall, (size_t)reps, sizeof(double), cmp_double);
		qsort(rows[i].cpu, (size_t)reps, sizeof(double), cmp_double);
	}
}

/* of a sorted array */
static double median(const double *t, int reps)
{
	return reps % 2 ? t[reps / 2] : (t[reps / 2 - 1] + t[reps / 2]) / 2;
}

int main(int argc, char **argv)
{
	struct row rows[] = {
	    {.name = "first touch (kernel zero-fill)", .run = run_first_touch},
	    {.name = "SIGBUS + UFFDIO_MOVE, 4 KiB", .run = run_sigbus_move, .chunk = 4096},
	    {.name = "SIGBUS + UFFDIO_MOVE, 4 KiB, read", .run = run_sigbus_move, .chunk = 4096, .read = true},
	    {.name = "SIGBUS + UFFDIO_MOVE, 64 KiB", .run = run_sigbus_move, .chunk = 65536},
	    {.name = "SIGBUS + UFFDIO_MOVE, 2 MiB THP", .run = run_sigbus_move, .chunk = HPAGE},
	    {.name = "SIGBUS + UFFDIO_MOVE, 2 MiB THP, read", .run = run_sigbus_move, .chunk = HPAGE, .read = true},
	    {.name = "fault thread + UFFDIO_COPY, 4 KiB", .run = run_thread_copy, .chunk = 4096},
	    {.name = "fault thread + UFFDIO_COPY, 4 KiB, read", .run = run_thread_copy, .chunk = 4096, .read = true},
	};
	struct sigaction sa = {.sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO};
	size_t nrows = sizeof(rows) / sizeof(rows[0]), pages = 16384, i;
	int reps = 5, c;

	while ((c = getopt(argc, argv, "n:r:")) != -1) {
		if (c == 'n')
			pages = strtoul(optarg, NULL, 10);
		else if (c == 'r')
			reps = atoi(optarg);
		else
			pages = 0;
	}
	ps = (size_t)sysconf(_SC_PAGESIZE);
	if (pages == 0 || (pages * ps) % HPAGE || reps < 3 || reps > MAX_REPS) {
		fprintf(stderr, "usage: bench-userfault [-n PAGES (a multiple of %zu)] [-r REPS (3..%d)]\n", HPAGE / ps,
			MAX_REPS);
		return 2;
	}
	g.len = pages * ps;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGBUS, &sa, NULL))
		die("sigaction");
	measure(rows, nrows, reps, pages);
	printf("bench-userfault: %zu pages (%zu MiB) per run, %d runs each, ns per 4 KiB page\n\n", pages, g.len >> 20,
	       reps);
	printf("| %-40s | %11s | %15s | %8s | %10s | %8s |\n", "method", "wall median", "wall min..max", "vs touch",
	       "CPU median", "vs touch");
	printf("|%s|%s|%s|%s|%s|%s|\n", "------------------------------------------", "-------------",
	       "-----------------", "----------", "------------", "----------");
	for (i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];

		printf("| %-40s | %11.0f | %7.0f..%-7.0f | %7.2fx | %10.0f | %7.2fx |\n", r->name,
		       median(r->wall, reps), r->wall[0], r->wall[reps - 1],
		       median(r->wall, reps) / median(rows[0].wall, reps), median(r->cpu, reps),
		       median(r->cpu, reps) / median(rows[0].cpu, reps));
	}
	return 0;
}

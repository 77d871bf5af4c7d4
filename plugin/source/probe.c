// SPDX-License-Identifier: MIT
/*
 * How to copy pages on this host, decided by a short measurement instead of a
 * constant: UFFDIO_COPY of slices of the largest pages file into a userfaultfd
 * region of our own, (a) from the file's mapping, populated as the engine does
 * it, and (b) through a reused buffer filled by pread, each at a small and a
 * large step, PROBE_ROUNDS rounds in alternating order, best round of each.
 * Every run copies a slice no run before it touched, so that neither the CPU
 * caches nor our page tables hold it already (the engine copies each page
 * once).  The hosts seen so far disagree on which way is faster
 * (plugin/README.md has the figures).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lib/uffd-compat.h"
#include "plugin/log/log.h"
#include "plugin/source/source.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

#define PROBE_SLICE  (4UL << 20)
#define PROBE_ROUNDS 3
#define PROBE_RUNS   (4 * PROBE_ROUNDS)
#define PROBE_SMALL  (64UL << 10)
#define PROBE_LARGE  (1UL << 20)

struct probe {
	int uffd;
	uint8_t *dst, *buf;
	uint64_t len;
	const struct img_pages *p;
};

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Seconds to install the slice at file offset base one way, or -1; the region is empty again after. */
static double probe_run(struct probe *pr, uint64_t base, bool map, uint64_t step)
{
	double t0 = mono(), t;

	for (uint64_t off = 0; off < pr->len; off += step) {
		uint64_t l = pr->len - off < step ? pr->len - off : step;
		const uint8_t *src = pr->buf;
		if (map) {
			src = pr->p->base + base + off;
			if (madvise((void *)src, l, MADV_POPULATE_READ))
				return -1;
		} else if (pread(pr->p->fd, pr->buf, l, (off_t)(base + off)) != (ssize_t)l) {
			return -1;
		}
		struct uffdio_copy c = {.dst = (uintptr_t)pr->dst + off, .src = (uintptr_t)src, .len = l};
		if (ioctl(pr->uffd, UFFDIO_COPY, &c))
			return -1;
	}
	t = mono() - t0;
	if (madvise(pr->dst, pr->len, MADV_DONTNEED))
		return -1;
	return t;
}

static int probe_setup(struct probe *pr)
{
	pr->uffd = lr_uffd_new(O_CLOEXEC | O_NONBLOCK, 0);
	if (pr->uffd < 0)
		return -1;
	pr->dst = mmap(NULL, pr->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (pr->dst == MAP_FAILED) {
		pr->dst = NULL;
		return -1;
	}
	struct uffdio_register reg = {.range = {.start = (uintptr_t)pr->dst, .len = pr->len},
				      .mode = UFFDIO_REGISTER_MODE_MISSING};
	if (ioctl(pr->uffd, UFFDIO_REGISTER, &reg))
		return -1;
	pr->buf = aligned_alloc(IMG_PAGE_SIZE, PROBE_LARGE);
	return pr->buf ? 0 : -1;
}

static void probe_teardown(struct probe *pr)
{
	if (pr->dst)
		munmap(pr->dst, pr->len);
	if (pr->uffd >= 0)
		close(pr->uffd);
	free(pr->buf);
}

void file_source_probe(struct img_dir *d, const struct img_mm *mms, size_t nr, enum page_source_kind want,
		       struct page_source_choice *out)
{
	static const struct {
		bool map;
		uint64_t step;
	} cfg[4] = {{true, PROBE_SMALL}, {true, PROBE_LARGE}, {false, PROBE_SMALL}, {false, PROBE_LARGE}};
	double best[4] = {-1, -1, -1, -1};
	struct probe pr = {.uffd = -1};
	struct img_pages pages = {.fd = -1};
	struct img_err err;
	size_t big = nr;

	out->kind = want == PAGE_SOURCE_MAP ? PAGE_SOURCE_MAP : PAGE_SOURCE_READ;
	out->step = out->kind == PAGE_SOURCE_MAP ? PROBE_SMALL : PROBE_LARGE;
	if (want != PAGE_SOURCE_AUTO) {
		snprintf(out->why, sizeof(out->why), "%s, as asked; background steps up to %llu KiB",
			 page_source_kind_name(want), (unsigned long long)(out->step >> 10));
		return;
	}
	for (size_t i = 0; i < nr; i++)
		if (big == nr || mms[i].pages_bytes > mms[big].pages_bytes)
			big = i;
	if (big == nr || mms[big].pages_bytes < PROBE_LARGE) {
		snprintf(out->why, sizeof(out->why), "pread: under 1 MiB of pages, nothing to measure");
		return;
	}
	/* PROBE_RUNS fresh slices if the file has them, else smaller ones (at least 1 MiB, reused) */
	uint64_t have = mms[big].pages_bytes;
	pr.len = have / PROBE_RUNS >= PROBE_SLICE ? PROBE_SLICE : (have / PROBE_RUNS) & ~(PROBE_LARGE - 1);
	if (!pr.len)
		pr.len = PROBE_LARGE;
	uint64_t slices = have / pr.len;
	if (img_pages_map(d, mms[big].pages_id, &pages, &err) || pages.size < slices * pr.len) {
		snprintf(out->why, sizeof(out->why), "pread: can't map a pages file to measure");
		goto out;
	}
	pr.p = &pages;
	if (probe_setup(&pr)) {
		snprintf(out->why, sizeof(out->why), "pread: no userfaultfd to measure with (%s)", strerror(errno));
		goto out;
	}
	for (int run = 0; run < PROBE_RUNS; run++) {
		int round = run / 4, k = round % 2 ? 3 - run % 4 : run % 4;
		double s = probe_run(&pr, (uint64_t)run % slices * pr.len, cfg[k].map, cfg[k].step);
		if (s < 0) {
			snprintf(out->why, sizeof(out->why), "pread: the measurement failed (%s)", strerror(errno));
			goto out;
		}
		if (best[k] < 0 || s < best[k])
			best[k] = s;
	}
	/* mmap must win clearly: it also fills our page tables with every page it serves */
	int w = best[3] < best[2] ? 3 : 2, m = best[1] < best[0] ? 1 : 0;
	if (best[m] < best[w] * 0.9)
		w = m;
	out->kind = cfg[w].map ? PAGE_SOURCE_MAP : PAGE_SOURCE_READ;
	out->step = cfg[w].step;
	double gb = (double)pr.len / 1e9;
	snprintf(out->why, sizeof(out->why),
		 "%s, steps up to %llu KiB: probe of %d x %llu MiB, best GB/s mmap %.2f (64 KiB steps) %.2f "
		 "(1 MiB), pread %.2f (64 KiB) %.2f (1 MiB)",
		 page_source_kind_name(out->kind), (unsigned long long)(out->step >> 10), PROBE_RUNS,
		 (unsigned long long)(pr.len >> 20), gb / best[0], gb / best[1], gb / best[2], gb / best[3]);
out:
	probe_teardown(&pr);
	img_pages_unmap(&pages);
}

// SPDX-License-Identifier: MIT
/*
 * How to copy pages on this host, decided by a short measurement instead of a
 * constant: UFFDIO_COPY of the first PROBE_BYTES of the largest pages file into
 * a userfaultfd region of our own, (a) from the file's populated mapping and
 * (b) through a reused buffer filled by pread, each at a small and a large
 * step, PROBE_ROUNDS alternating rounds, best round of each.  The hosts seen so
 * far disagree on which is faster (plugin/README.md has the figures).
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

#define PROBE_BYTES  (4UL << 20)
#define PROBE_ROUNDS 3
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

/* Seconds to install the probe's bytes one way, or -1; the region is empty again after. */
static double probe_run(struct probe *pr, bool map, uint64_t step)
{
	double t0 = mono(), t;

	for (uint64_t off = 0; off < pr->len; off += step) {
		uint64_t l = pr->len - off < step ? pr->len - off : step;
		const uint8_t *src = pr->buf;
		if (map) {
			src = pr->p->base + off;
			if (madvise((void *)src, l, MADV_POPULATE_READ))
				return -1;
		} else if (pread(pr->p->fd, pr->buf, l, (off_t)off) != (ssize_t)l) {
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
	struct uffdio_api api = {.api = UFFD_API};

	pr->uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (pr->uffd < 0 || ioctl(pr->uffd, UFFDIO_API, &api))
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
	pr.len = mms[big].pages_bytes < PROBE_BYTES ? mms[big].pages_bytes & ~(PROBE_LARGE - 1) : PROBE_BYTES;
	if (img_pages_map(d, mms[big].pages_id, &pages, &err) || pages.size < pr.len) {
		snprintf(out->why, sizeof(out->why), "pread: can't map a pages file to measure");
		goto out;
	}
	pr.p = &pages;
	if (probe_setup(&pr)) {
		snprintf(out->why, sizeof(out->why), "pread: no userfaultfd to measure with (%s)", strerror(errno));
		goto out;
	}
	/* A first untimed round of each brings the file into the page cache. */
	for (int round = 0; round <= PROBE_ROUNDS; round++)
		for (int k = 0; k < 4; k++) {
			double s = probe_run(&pr, cfg[k].map, cfg[k].step);
			if (s < 0) {
				snprintf(out->why, sizeof(out->why), "pread: the measurement failed (%s)",
					 strerror(errno));
				goto out;
			}
			if (round && (best[k] < 0 || s < best[k]))
				best[k] = s;
		}
	int w = 0;
	for (int k = 1; k < 4; k++)
		if (best[k] < best[w])
			w = k;
	out->kind = cfg[w].map ? PAGE_SOURCE_MAP : PAGE_SOURCE_READ;
	out->step = cfg[w].step;
	double gb = (double)pr.len / 1e9;
	snprintf(out->why, sizeof(out->why),
		 "%s, steps up to %llu KiB: probe of %llu MiB, GB/s mmap %.2f (64 KiB) %.2f (1 MiB), pread %.2f "
		 "(64 KiB) %.2f (1 MiB)",
		 page_source_kind_name(out->kind), (unsigned long long)(out->step >> 10),
		 (unsigned long long)(pr.len >> 20), gb / best[0], gb / best[1], gb / best[2], gb / best[3]);
out:
	probe_teardown(&pr);
	img_pages_unmap(&pages);
}

// SPDX-License-Identifier: MIT
/*
 * methods: which access-tracking mechanism of this kernel tells which pages
 * a program read and which it wrote (record-ws's choice, plugin/README.md).
 * In this process: 64 pages written, then tracking armed, then pages 0-15
 * read and pages 16-31 written; each method says which pages it saw.
 *   a  userfaultfd WP_ASYNC + PAGEMAP_SCAN (PAGE_IS_WRITTEN)
 *   b  MADV_PAGEOUT to swap + PAGEMAP_SCAN (PAGE_IS_PRESENT)
 *   c  clear_refs 1 + /proc/kpageflags REFERENCED (no idle page tracking here)
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../lib/pagemap-compat.h"
#include "../../lib/uffd-compat.h"

#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13)
#endif

#define NP 64
#define PG 4096UL

static volatile uint8_t *mem;

static void fill(void)
{
	for (int i = 0; i < NP; i++)
		mem[i * PG] = (uint8_t)(i + 1);
}

static void act(void)
{
	unsigned sum = 0;
	for (int i = 0; i < 16; i++)
		sum += mem[i * PG];
	for (int i = 16; i < 32; i++)
		mem[i * PG] = 7;
	if (sum == 12345)
		puts("");
}

/* the pages PAGEMAP_SCAN reports in category cat, as "first-last" runs */
static void report(const char *name, uint64_t flags, uint64_t cat)
{
	struct page_region r[NP] = {{0}};
	struct pm_scan_arg a = {.size = sizeof(a),
				.flags = flags,
				.start = (uint64_t)(uintptr_t)mem,
				.end = (uint64_t)(uintptr_t)mem + NP * PG,
				.vec = (uint64_t)(uintptr_t)r,
				.vec_len = NP,
				.category_mask = cat,
				.return_mask = cat};
	int fd = open("/proc/self/pagemap", O_RDONLY);
	long n = fd < 0 ? -1 : ioctl(fd, PAGEMAP_SCAN, &a);

	printf("%s: ", name);
	if (n < 0)
		printf("PAGEMAP_SCAN failed: %s", strerror(errno));
	for (long i = 0; i < n; i++)
		printf("%s%lu-%lu", i ? "," : "pages ", (unsigned long)((r[i].start - a.start) / PG),
		       (unsigned long)((r[i].end - a.start) / PG - 1));
	printf("%s (read 0-15, written 16-31)\n", n == 0 ? "none" : "");
	if (fd >= 0)
		close(fd);
}

static void method_a(void)
{
	int uffd = lr_uffd_new(O_CLOEXEC | O_NONBLOCK, UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED);
	struct uffdio_register reg = {.range = {(uint64_t)(uintptr_t)mem, NP * PG}, .mode = UFFDIO_REGISTER_MODE_WP};
	struct uffdio_writeprotect wp = {.range = reg.range, .mode = UFFDIO_WRITEPROTECT_MODE_WP};

	if (uffd < 0 || ioctl(uffd, UFFDIO_REGISTER, &reg) || ioctl(uffd, UFFDIO_WRITEPROTECT, &wp)) {
		printf("a uffd-wp async: setup failed: %s\n", strerror(errno));
		return;
	}
	act();
	report("a uffd-wp async, PAGE_IS_WRITTEN", PM_SCAN_CHECK_WPASYNC, PAGE_IS_WRITTEN);
	close(uffd);
}

static void method_b(void)
{
	if (madvise((void *)mem, NP * PG, MADV_PAGEOUT)) {
		printf("b pageout: MADV_PAGEOUT failed: %s\n", strerror(errno));
		return;
	}
	report("b pageout, present right after MADV_PAGEOUT", 0, PAGE_IS_PRESENT);
	act();
	report("b pageout, PAGE_IS_PRESENT after the accesses", 0, PAGE_IS_PRESENT);
}

static int kpf_referenced(int pm, int kpf, int i)
{
	uint64_t e, f;
	if (pread(pm, &e, 8, (off_t)((uintptr_t)mem / PG + i) * 8) != 8 || !(e >> 63) || !(e & ((1ULL << 55) - 1)))
		return -1;
	if (pread(kpf, &f, 8, (off_t)(e & ((1ULL << 55) - 1)) * 8) != 8)
		return -1;
	return (int)(f >> 2 & 1); /* KPF_REFERENCED */
}

static void method_c(void)
{
	int cr = open("/proc/self/clear_refs", O_WRONLY), pm = open("/proc/self/pagemap", O_RDONLY),
	    kpf = open("/proc/kpageflags", O_RDONLY);
	int seen[NP], nseen = 0;

	if (cr < 0 || pm < 0 || kpf < 0 || write(cr, "1", 1) != 1) {
		printf("c clear_refs+kpageflags: setup failed: %s\n", strerror(errno));
		return;
	}
	act();
	for (int i = 0; i < NP; i++)
		if (kpf_referenced(pm, kpf, i) == 1)
			seen[nseen++] = i;
	printf("c clear_refs 1 + kpageflags REFERENCED: %d pages flagged:", nseen);
	for (int i = 0; i < nseen; i++)
		printf(" %d", seen[i]);
	printf(" (read 0-15, written 16-31; idle page tracking: %s)\n",
	       access("/sys/kernel/mm/page_idle/bitmap", F_OK) ? "absent" : "present");
	close(cr);
	close(pm);
	close(kpf);
}

int main(int argc, char **argv)
{
	const char *which = argc > 1 ? argv[1] : "abc";

	for (const char *m = which; *m; m++) {
		mem = mmap(NULL, NP * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (mem == MAP_FAILED)
			return 1;
		madvise((void *)mem, NP * PG, MADV_NOHUGEPAGE);
		fill();
		if (*m == 'a')
			method_a();
		else if (*m == 'b')
			method_b();
		else if (*m == 'c')
			method_c();
		munmap((void *)mem, NP * PG);
	}
	return 0;
}

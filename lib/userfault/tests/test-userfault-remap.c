// SPDX-License-Identifier: MIT
/*
 * uf_remap_anon_pages(): every rule and errno, atomicity, a THP moved
 * without split, and 4 threads faulting one range in SIGBUS mode.
 */
#include <pthread.h>

#include "lib/userfault/tests/uf-test.h"

static void expect_fail(int ret, int err)
{
	assert_int_equal(ret, -1);
	assert_int_equal(errno, err);
}

/* n pages armed at dst, n filled pages at src */
struct pair {
	char *dst, *src;
	size_t len;
};

static struct pair make_pair(size_t n, uint64_t seed)
{
	struct pair pr = {map_anon(n * PS, PS), map_anon(n * PS, PS), n * PS};

	assert_int_equal(uf_madvise_userfault(pr.dst, pr.len), 0);
	fill_pattern(pr.src, pr.len, seed, 0);
	return pr;
}

static void drop_pair(struct pair *pr)
{
	munmap(pr->dst, pr->len);
	munmap(pr->src, pr->len);
}

static void test_unaligned(void **state)
{
	struct pair pr = make_pair(4, 1);

	expect_fail(uf_remap_anon_pages(pr.dst + 8, pr.src, PS), EINVAL);
	expect_fail(uf_remap_anon_pages(pr.dst, pr.src + 8, PS), EINVAL);
	expect_fail(uf_remap_anon_pages(pr.dst, pr.src, PS + 8), EINVAL);
	expect_fail(uf_remap_anon_pages(pr.dst, pr.src, 0), EINVAL);
	assert_int_equal(count_mapped(pr.dst, pr.len), 0);
	assert_int_equal(count_mapped(pr.src, pr.len), 4);
	drop_pair(&pr);
}

static void test_overlap(void **state)
{
	struct pair pr = make_pair(4, 1);

	expect_fail(uf_remap_anon_pages(pr.dst + PS, pr.dst, 2 * PS), EINVAL);
	drop_pair(&pr);
}

/* One present page in the middle of dst: EEXIST, and nothing moved. */
static void test_dst_present_eexist(void **state)
{
	struct pair pr = make_pair(8, 2);
	char *one = map_anon(PS, PS);
	char addr[32];

	fill_pattern(one, PS, 2, 5 * PS);
	assert_int_equal(uf_remap_anon_pages(pr.dst + 5 * PS, one, PS), 0);
	expect_fail(uf_remap_anon_pages(pr.dst, pr.src, pr.len), EEXIST);
	snprintf(addr, sizeof(addr), "%p", (void *)(pr.dst + 5 * PS));
	assert_non_null(strstr(uf_last_error(), addr));
	assert_int_equal(count_mapped(pr.dst, pr.len), 1);
	assert_int_equal(count_mapped(pr.src, pr.len), 8);
	/* single page onto a present page: the kernel's own check */
	expect_fail(uf_remap_anon_pages(pr.dst + 5 * PS, pr.src, PS), EEXIST);
	assert_true(page_mapped(pr.src));
	munmap(one, PS);
	drop_pair(&pr);
}

/* One missing page in the middle of src: ENOENT, and nothing moved. */
static void test_src_missing_enoent(void **state)
{
	struct pair pr = make_pair(8, 3);

	assert_int_equal(madvise(pr.src + 6 * PS, PS, MADV_DONTNEED), 0);
	expect_fail(uf_remap_anon_pages(pr.dst, pr.src, pr.len), ENOENT);
	assert_non_null(strstr(uf_last_error(), "src page is missing"));
	assert_int_equal(count_mapped(pr.dst, pr.len), 0);
	assert_int_equal(count_mapped(pr.src, pr.len), 7);
	expect_fail(uf_remap_anon_pages(pr.dst, pr.src + 6 * PS, PS), ENOENT);
	drop_pair(&pr);
}

/* dst must be armed: the kernel moves only into a registered range. */
static void test_dst_not_armed(void **state)
{
	char *dst = map_anon(2 * PS, PS), *src = map_anon(2 * PS, PS);

	fill_pattern(src, 2 * PS, 4, 0);
	expect_fail(uf_remap_anon_pages(dst, src, 2 * PS), EINVAL);
	assert_int_equal(count_mapped(src, 2 * PS), 2);
	munmap(dst, 2 * PS);
	munmap(src, 2 * PS);
}

/* The kernel moves only between mappings of the same protection. */
static void test_protection_mismatch(void **state)
{
	struct pair pr = make_pair(4, 8);

	assert_int_equal(mprotect(pr.src, pr.len, PROT_READ), 0);
	expect_fail(uf_remap_anon_pages(pr.dst, pr.src, PS), EINVAL);
	expect_fail(uf_remap_anon_pages(pr.dst, pr.src, pr.len), EINVAL);
	assert_non_null(strstr(uf_last_error(), "protection"));
	assert_int_equal(count_mapped(pr.dst, pr.len), 0);
	assert_int_equal(check_pattern(pr.src, pr.len, 8, 0), pr.len);
	drop_pair(&pr);
}

/* After a move dst has the bytes and src is missing (reads zero again). */
static void test_atomic_move(void **state)
{
	struct pair pr = make_pair(16, 5);

	assert_int_equal(uf_remap_anon_pages(pr.dst, pr.src, pr.len), 0);
	assert_int_equal(count_mapped(pr.dst, pr.len), 16);
	assert_int_equal(count_mapped(pr.src, pr.len), 0);
	assert_int_equal(check_pattern(pr.dst, pr.len, 5, 0), pr.len);
	assert_int_equal(((volatile char *)pr.src)[3 * PS + 1], 0);
	/* moving again from the now-missing source is refused */
	expect_fail(uf_remap_anon_pages(pr.dst, pr.src, pr.len), EEXIST);
	drop_pair(&pr);
}

/* A 2 MiB-aligned THP source; retried because the kernel may not have a
 * huge page at hand at this moment. */
static char *make_thp_source(uint64_t seed)
{
	int attempt;

	for (attempt = 0; attempt < 5; attempt++) {
		char *src = map_anon(HPAGE, HPAGE);

		assert_int_equal(madvise(src, HPAGE, MADV_HUGEPAGE), 0);
		fill_pattern(src, HPAGE, seed, 0);
		if (smaps_anon_huge_kb(src) >= (long)(HPAGE >> 10))
			return src;
		munmap(src, HPAGE);
		usleep(100 * 1000);
	}
	return NULL;
}

static void test_thp_move_no_split(void **state)
{
	char *dst = map_anon(HPAGE, HPAGE), *src = make_thp_source(6);
	long src_before, dst_before, src_after, dst_after;

	if (!src) {
		print_message("SKIP: test_thp_move_no_split: no transparent huge page after 5 tries\n");
		skip();
	}
	assert_int_equal(madvise(dst, HPAGE, MADV_HUGEPAGE), 0);
	assert_int_equal(uf_madvise_userfault(dst, HPAGE), 0);
	src_before = smaps_anon_huge_kb(src);
	dst_before = smaps_anon_huge_kb(dst);
	assert_int_equal(uf_remap_anon_pages(dst, src, HPAGE), 0);
	src_after = smaps_anon_huge_kb(src);
	dst_after = smaps_anon_huge_kb(dst);
	print_message("AnonHugePages: src %ld -> %ld kB, dst %ld -> %ld kB\n", src_before, src_after, dst_before,
		      dst_after);
	assert_int_equal(dst_before, 0);
	assert_int_equal(dst_after, HPAGE >> 10);	       /* arrived as one huge page */
	assert_int_equal(src_before - src_after, HPAGE >> 10); /* and left as one */
	assert_int_equal(count_mapped(src, HPAGE), 0);
	assert_int_equal(check_pattern(dst, HPAGE, 6, 0), HPAGE);
	munmap(dst, HPAGE);
	munmap(src, HPAGE);
}

/* A range that is not huge-aligned moves too (the kernel splits). */
static void test_thp_partial_move_splits(void **state)
{
	char *dst = map_anon(HPAGE, HPAGE), *src = make_thp_source(7);

	if (!src) {
		print_message("SKIP: test_thp_partial_move_splits: no transparent huge page after 5 tries\n");
		skip();
	}
	assert_int_equal(uf_madvise_userfault(dst, HPAGE), 0);
	assert_int_equal(uf_remap_anon_pages(dst, src, 16 * PS), 0);
	assert_int_equal(smaps_anon_huge_kb(src), 0);
	assert_int_equal(count_mapped(src, HPAGE), HPAGE / PS - 16);
	assert_int_equal(check_pattern(dst, 16 * PS, 7, 0), 16 * PS);
	munmap(dst, HPAGE);
	munmap(src, HPAGE);
}

/* ---- 4 threads faulting one range, each filling in its own handler ---- */
#define NTHREADS   4
#define CONC_PAGES 2048
#define CONC_SEED  0xc0ffee

static char *conc_base;
static size_t conc_chunk; /* bytes moved per fault */
static __thread char *conc_staging;
static volatile unsigned long conc_faults, conc_raced;

static void conc_handler(int sig, siginfo_t *si, void *uc)
{
	char *addr = si->si_addr, *chunk;

	if (addr < conc_base || addr >= conc_base + CONC_PAGES * PS)
		abort(); /* not ours: a real bug */
	chunk = conc_base + ((size_t)(addr - conc_base) & ~(conc_chunk - 1));
	__atomic_fetch_add(&conc_faults, 1, __ATOMIC_RELAXED);
	fill_pattern(conc_staging, conc_chunk, CONC_SEED, (size_t)(chunk - conc_base));
	if (uf_remap_anon_pages(chunk, conc_staging, conc_chunk) == 0)
		return;
	if (errno != EEXIST) /* another thread filled it first: retry the access */
		abort();
	__atomic_fetch_add(&conc_raced, 1, __ATOMIC_RELAXED);
}

/* Every thread reads every page, starting at a different place. */
static void *conc_worker(void *arg)
{
	size_t start = (size_t)(uintptr_t)arg * CONC_PAGES / NTHREADS, i;
	size_t bad = 0;

	conc_staging = map_anon(conc_chunk, PS);
	for (i = 0; i < CONC_PAGES; i++) {
		size_t pg = (start + i * 7) % CONC_PAGES; /* 7 is coprime to CONC_PAGES */

		if (check_pattern(conc_base + pg * PS, PS, CONC_SEED, pg * PS) != PS)
			bad++;
	}
	munmap(conc_staging, conc_chunk);
	return (void *)(uintptr_t)bad;
}

static void four_threads(size_t chunk)
{
	pthread_t tid[NTHREADS];
	uintptr_t t;

	conc_base = map_anon(CONC_PAGES * PS, PS);
	conc_chunk = chunk;
	conc_faults = conc_raced = 0;
	assert_int_equal(uf_madvise_userfault(conc_base, CONC_PAGES * PS), 0);
	install_handler(SIGBUS, conc_handler);
	for (t = 0; t < NTHREADS; t++)
		assert_int_equal(pthread_create(&tid[t], NULL, conc_worker, (void *)t), 0);
	for (t = 0; t < NTHREADS; t++) {
		void *bad;

		assert_int_equal(pthread_join(tid[t], &bad), 0);
		assert_int_equal((uintptr_t)bad, 0);
	}
	reset_handler(SIGBUS);
	print_message("4 threads, %zu KiB moves: %lu faults, %lu lost a race (EEXIST), %d pages\n", chunk >> 10,
		      conc_faults, conc_raced, CONC_PAGES);
	assert_true(conc_faults >= CONC_PAGES * PS / chunk);
	assert_int_equal(count_mapped(conc_base, CONC_PAGES * PS), CONC_PAGES);
	assert_int_equal(check_pattern(conc_base, CONC_PAGES * PS, CONC_SEED, 0), CONC_PAGES * PS);
	munmap(conc_base, CONC_PAGES * PS);
}

static void test_four_threads_one_range(void **state)
{
	four_threads(PS);
}

/* Multi-page moves racing: the pre-checked path, and the kernel's EEXIST. */
static void test_four_threads_one_range_64k(void **state)
{
	four_threads(16 * PS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_unaligned),
	    cmocka_unit_test(test_overlap),
	    cmocka_unit_test(test_dst_present_eexist),
	    cmocka_unit_test(test_src_missing_enoent),
	    cmocka_unit_test(test_dst_not_armed),
	    cmocka_unit_test(test_protection_mismatch),
	    cmocka_unit_test(test_atomic_move),
	    cmocka_unit_test(test_thp_move_no_split),
	    cmocka_unit_test(test_thp_partial_move_splits),
	    cmocka_unit_test(test_four_threads_one_range),
	    cmocka_unit_test(test_four_threads_one_range_64k),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

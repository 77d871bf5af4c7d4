// SPDX-License-Identifier: MIT
/* Unit tests of the lazy range bookkeeping and the latency histogram. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plugin/engine/ranges.h"
#include "plugin/engine/stats.h"

#define P 4096ULL

struct exp {
	uint64_t start, end, img;
};

static void expect_ranges(const struct lr_ranges *r, const struct exp *e, size_t n)
{
	uint64_t pages = 0;

	assert_int_equal(r->nr, n);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(r->v[i].start, e[i].start);
		assert_int_equal(r->v[i].end, e[i].end);
		assert_int_equal(r->v[i].img, e[i].img);
		pages += (e[i].end - e[i].start) / P;
	}
	assert_int_equal(r->pages, pages);
}

static void test_drop(void **state)
{
	/* table: drop [s,e) from one range [10P,20P) img 10P */
	static const struct {
		uint64_t s, e;
		size_t n;
		struct exp want[2];
	} cases[] = {
	    {0, 5 * P, 1, {{10 * P, 20 * P, 10 * P}}},				       /* before */
	    {0, 12 * P, 1, {{12 * P, 20 * P, 12 * P}}},				       /* head */
	    {18 * P, 30 * P, 1, {{10 * P, 18 * P, 10 * P}}},			       /* tail */
	    {12 * P, 15 * P, 2, {{10 * P, 12 * P, 10 * P}, {15 * P, 20 * P, 15 * P}}}, /* middle */
	    {10 * P, 20 * P, 0, {{0}}},						       /* all */
	    {15 * P, 15 * P, 1, {{10 * P, 20 * P, 10 * P}}},			       /* empty */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct lr_ranges r;
		lr_ranges_init(&r);
		assert_int_equal(lr_ranges_add(&r, 10 * P, 20 * P, 10 * P), 0);
		assert_int_equal(lr_ranges_drop(&r, cases[i].s, cases[i].e), 0);
		expect_ranges(&r, cases[i].want, cases[i].n);
		lr_ranges_free(&r);
	}
}

static void test_add_find_overlap(void **state)
{
	struct lr_ranges r;

	lr_ranges_init(&r);
	assert_int_equal(lr_ranges_add(&r, 30 * P, 40 * P, 30 * P), 0);
	assert_int_equal(lr_ranges_add(&r, 10 * P, 20 * P, 10 * P), 0);
	assert_int_equal(lr_ranges_add(&r, 15 * P, 35 * P, 0), -1); /* overlap refused */
	assert_int_equal(lr_ranges_find(&r, 10 * P), 0);
	assert_int_equal(lr_ranges_find(&r, 20 * P - 1), 0);
	assert_int_equal(lr_ranges_find(&r, 20 * P), -1);
	assert_int_equal(lr_ranges_find(&r, 39 * P), 1);
	lr_ranges_free(&r);
}

static void test_remap(void **state)
{
	struct lr_ranges r;

	lr_ranges_init(&r);
	lr_ranges_add(&r, 10 * P, 20 * P, 10 * P);
	lr_ranges_add(&r, 100 * P, 110 * P, 100 * P); /* at the target: replaced */
	/* move [15P,25P) to 100P: the piece [15P,20P) lands at [100P,105P) */
	assert_int_equal(lr_ranges_remap(&r, 15 * P, 100 * P, 10 * P), 0);
	const struct exp want[] = {{10 * P, 15 * P, 10 * P}, {100 * P, 105 * P, 15 * P}};
	expect_ranges(&r, want, 2);
	/* and back down, below the first range */
	assert_int_equal(lr_ranges_remap(&r, 100 * P, 2 * P, 5 * P), 0);
	const struct exp want2[] = {{2 * P, 7 * P, 15 * P}, {10 * P, 15 * P, 10 * P}};
	expect_ranges(&r, want2, 2);
	lr_ranges_free(&r);
}

static void test_copy_merge(void **state)
{
	struct lr_ranges a, b;

	lr_ranges_init(&a);
	lr_ranges_init(&b);
	lr_ranges_add(&a, 10 * P, 20 * P, 10 * P);
	assert_int_equal(lr_ranges_copy(&b, &a), 0);
	lr_ranges_drop(&a, 10 * P, 20 * P);
	assert_int_equal(b.nr, 1); /* a deep copy */
	assert_int_equal(b.pages, 10);
	lr_ranges_add(&a, 30 * P, 31 * P, 30 * P);
	assert_int_equal(lr_ranges_merge(&b, &a), 0);
	const struct exp want[] = {{10 * P, 20 * P, 10 * P}, {30 * P, 31 * P, 30 * P}};
	expect_ranges(&b, want, 2);
	lr_ranges_free(&a);
	lr_ranges_free(&b);
}

static void test_pick(void **state)
{
	const uint64_t C = 2ULL << 20, base = 0x40000000ULL;
	struct lr_ranges r;
	struct lr_range out;

	lr_ranges_init(&r);
	assert_int_equal(lr_ranges_pick(&r, 0, C, &out), -1);
	lr_ranges_add(&r, base + P, base + 3 * C, base + P);
	/* hint in the middle of the second block: that aligned block */
	assert_int_equal(lr_ranges_pick(&r, base + C + 5 * P, C, &out), 0);
	assert_int_equal(out.start, base + C);
	assert_int_equal(out.end, base + 2 * C);
	assert_int_equal(out.img, base + C);
	/* hint past the end wraps to the first range, clipped to the block */
	assert_int_equal(lr_ranges_pick(&r, base + 10 * C, C, &out), 0);
	assert_int_equal(out.start, base + P);
	assert_int_equal(out.end, base + C);
	lr_ranges_free(&r);
}

static void test_build(void **state)
{
	struct img_vma vmas[] = {
	    {.start = 0x10000, .end = 0x20000, .flags = 0x22, .status = 0x201}, /* anon private */
	    {.start = 0x20000, .end = 0x30000, .flags = 0x22, .status = 0x201},
	    {.start = 0x40000, .end = 0x50000, .flags = 0x02, .status = 0x41}, /* file private */
	};
	struct img_pme pmes[] = {
	    {.vaddr = 0x18000, .nr_pages = 16, .flags = IMG_PE_LAZY | IMG_PE_PRESENT}, /* spans 2 VMAs */
	    {.vaddr = 0x2c000, .nr_pages = 2, .flags = IMG_PE_PRESENT},		       /* eager */
	};
	struct img_mm mm = {.pid = 7, .nr_vmas = 3, .vmas = vmas, .nr_pmes = 2, .pmes = pmes};
	struct lr_ranges r;
	char err[256];

	lr_ranges_init(&r);
	assert_int_equal(lr_ranges_build(&r, &mm, err, sizeof(err)), 0);
	const struct exp want[] = {{0x18000, 0x20000, 0x18000}, {0x20000, 0x28000, 0x20000}};
	expect_ranges(&r, want, 2);
	lr_ranges_free(&r);

	/* lazy data in a VMA that cannot be lazy: refused, naming the file */
	pmes[1] = (struct img_pme){.vaddr = 0x40000, .nr_pages = 1, .flags = IMG_PE_LAZY | IMG_PE_PRESENT};
	assert_int_equal(lr_ranges_build(&r, &mm, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "pagemap-7.img"));
	lr_ranges_free(&r);

	/* lazy without data (dump --lazy-pages): refused */
	pmes[1] = (struct img_pme){.vaddr = 0x2c000, .nr_pages = 1, .flags = IMG_PE_LAZY};
	assert_int_equal(lr_ranges_build(&r, &mm, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "no data in the local image"));
	lr_ranges_free(&r);
}

static void test_percentiles(void **state)
{
	struct lr_stats *s = calloc(1, sizeof(*s));

	assert_non_null(s);
	assert_true(lr_stats_percentile(s, 50) == 0);
	for (uint64_t i = 1; i <= 1000; i++)
		lr_stats_latency(s, i * 1000); /* 1..1000 µs */
	double p50 = lr_stats_percentile(s, 50), p99 = lr_stats_percentile(s, 99);
	/* buckets are within 1/16 of the value */
	assert_true(p50 >= 500 && p50 <= 500 * 17 / 16.0 + 1);
	assert_true(p99 >= 990 && p99 <= 1000);
	assert_true(lr_stats_percentile(s, 100) == 1000);
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_drop),	cmocka_unit_test(test_add_find_overlap),
	    cmocka_unit_test(test_remap),	cmocka_unit_test(test_copy_merge),
	    cmocka_unit_test(test_pick),	cmocka_unit_test(test_build),
	    cmocka_unit_test(test_percentiles),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

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
		const struct lr_range *g = lr_ranges_nth(r, i);
		assert_non_null(g);
		assert_int_equal(g->start, e[i].start);
		assert_int_equal(g->end, e[i].end);
		assert_int_equal(g->img, e[i].img);
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
	assert_ptr_equal(lr_ranges_get(&r, 10 * P), lr_ranges_nth(&r, 0));
	assert_ptr_equal(lr_ranges_get(&r, 20 * P - 1), lr_ranges_nth(&r, 0));
	assert_null(lr_ranges_get(&r, 20 * P));
	assert_ptr_equal(lr_ranges_get(&r, 39 * P), lr_ranges_nth(&r, 1));
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

/*
 * Against a model, a page array holding each page's dump-time address (0: not
 * pending): thousands of random drops, adds and remaps over 4096 pages, so
 * that blocks fill, split and empty (LR_RBLOCK ranges a block).  After each
 * step: the ranges list exactly the model's pages, in order, maximal or not,
 * and every page's lookup agrees.
 */
#define MODEL_PAGES 4096U

static void check_model(const struct lr_ranges *r, const uint64_t *model)
{
	uint64_t pages = 0, prev_end = 0;

	for (size_t i = 0; i < r->nr; i++) {
		const struct lr_range *g = lr_ranges_nth(r, i);
		assert_non_null(g);
		assert_true(g->start < g->end && g->start >= prev_end);
		for (uint64_t a = g->start; a < g->end; a += P)
			assert_int_equal(model[a / P], g->img + (a - g->start));
		pages += (g->end - g->start) / P;
		prev_end = g->end;
	}
	assert_int_equal(r->pages, pages);
	for (uint64_t k = 0; k < MODEL_PAGES; k++) {
		const struct lr_range *g = lr_ranges_get(r, k * P);
		assert_true(model[k] ? g && model[k] == g->img + (k * P - g->start) : !g);
		assert_int_equal(lr_ranges_overlap(r, k * P, (k + 1) * P), model[k] != 0);
	}
}

static void test_model(void **state)
{
	static uint64_t model[MODEL_PAGES];
	struct lr_ranges r, c;
	uint64_t seed = 0x9E3779B97F4A7C15ULL;
	size_t most = 0;

	(void)state;
	lr_ranges_init(&r);
	/* every page pending, in ranges of 1-8 pages, its dump-time address 1 GiB above */
	for (uint64_t k = 0; k < MODEL_PAGES;) {
		uint64_t n = 1 + k % 8 < MODEL_PAGES - k ? 1 + k % 8 : MODEL_PAGES - k;
		assert_int_equal(lr_ranges_add(&r, k * P, (k + n) * P, (1ULL << 30) + k * P), 0);
		for (uint64_t j = k; j < k + n; j++)
			model[j] = (1ULL << 30) + j * P;
		k += n;
	}
	check_model(&r, model);
	for (int step = 0; step < 3000; step++) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		uint64_t s = (seed >> 33) % MODEL_PAGES, len = 1 + (seed >> 20) % 24;
		if (s + len > MODEL_PAGES)
			len = MODEL_PAGES - s;
		switch ((seed >> 60) % 4) {
		case 0:
		case 1: /* installed or dropped: a fault window, a run, a REMOVE */
			assert_int_equal(lr_ranges_drop(&r, s * P, (s + len) * P), 0);
			for (uint64_t j = s; j < s + len; j++)
				model[j] = 0;
			break;
		case 2: { /* back to pending where nothing is (a claim let go) */
			uint64_t e = s;
			while (e < s + len && !model[e])
				e++;
			assert_int_equal(lr_ranges_add(&r, s * P, e * P, (2ULL << 30) + s * P), 0);
			for (uint64_t j = s; j < e; j++)
				model[j] = (2ULL << 30) + j * P;
			break;
		}
		default: { /* moved elsewhere in the model's span (REMAP) */
			uint64_t to = (seed >> 8) % (MODEL_PAGES - len + 1);
			uint64_t moved[24];
			memcpy(moved, model + s, len * sizeof(moved[0]));
			assert_int_equal(lr_ranges_remap(&r, s * P, to * P, len * P), 0);
			for (uint64_t j = s; j < s + len; j++)
				model[j] = 0;
			for (uint64_t j = 0; j < len; j++)
				model[to + j] = moved[j];
			break;
		}
		}
		if (r.nr > most)
			most = r.nr;
		if (step % 100 == 0)
			check_model(&r, model);
	}
	check_model(&r, model);
	/* a deep copy (fork) of many blocks */
	lr_ranges_init(&c);
	assert_int_equal(lr_ranges_copy(&c, &r), 0);
	lr_ranges_drop(&r, 0, MODEL_PAGES * P);
	assert_int_equal(r.nr, 0);
	assert_null(lr_ranges_first(&r));
	check_model(&c, model);
	print_message("  %zu ranges at most (%d a block)\n", most, LR_RBLOCK);
	assert_true(most > 4 * LR_RBLOCK);
	lr_ranges_free(&r);
	lr_ranges_free(&c);
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
	    cmocka_unit_test(test_percentiles), cmocka_unit_test(test_model),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

// SPDX-License-Identifier: MIT
/*
 * uf_handler_thread(): faults served by a thread through a fill callback,
 * the same registration rules, a failed fill poisons (SIGBUS, never wrong
 * bytes), stop poisons what was never filled, and 4 threads faulting one
 * range.
 */
#include <pthread.h>

#include "lib/userfault/tests/uf-test.h"

struct src {
	char *base;
	uint64_t seed;
	size_t fail_page; /* page index whose fill fails, or SIZE_MAX */
	bool zero_copy;	  /* return own bytes instead of filling buf */
	char *own;	  /* zero_copy: the whole range, pre-filled */
	unsigned long calls;
};

static const void *fill(void *page, void *buf, void *arg)
{
	struct src *s = arg;
	size_t off = (size_t)((char *)page - s->base);

	s->calls++;
	if (off / PS == s->fail_page) {
		errno = EIO;
		return NULL;
	}
	if (s->zero_copy)
		return s->own + off;
	fill_pattern(buf, PS, s->seed, off);
	return buf;
}

static void test_serves_faults(void **state)
{
	const size_t n = 256;
	struct src s = {.base = map_anon(n * PS, PS), .seed = 11, .fail_page = SIZE_MAX};
	struct uf_handler_stats st;
	struct uf_handler *h = uf_handler_thread(s.base, n * PS, fill, &s);

	assert_non_null(h);
	assert_int_equal(check_pattern(s.base, n * PS, s.seed, 0), n * PS);
	assert_int_equal(uf_handler_stop(h, &st), 0);
	assert_int_equal(st.copies, n);
	assert_int_equal(st.faults, n);
	assert_int_equal(st.poisoned, 0);
	assert_int_equal(s.calls, n);
	munmap(s.base, n * PS);
}

static void test_zero_copy_source(void **state)
{
	const size_t n = 64;
	struct src s = {.base = map_anon(n * PS, PS), .seed = 12, .fail_page = SIZE_MAX, .zero_copy = true};
	struct uf_handler *h;

	s.own = map_anon(n * PS, PS);
	fill_pattern(s.own, n * PS, s.seed, 0);
	h = uf_handler_thread(s.base, n * PS, fill, &s);
	assert_non_null(h);
	assert_int_equal(check_pattern(s.base, n * PS, s.seed, 0), n * PS);
	assert_int_equal(uf_handler_stop(h, NULL), 0);
	munmap(s.base, n * PS);
	munmap(s.own, n * PS);
}

static void test_rules(void **state)
{
	char *p = map_anon(4 * PS, PS);
	char *shared = mmap(NULL, PS, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct src s = {.base = p, .fail_page = SIZE_MAX};

	assert_true(shared != MAP_FAILED);
	assert_null(uf_handler_thread(p + 1, PS, fill, &s));
	assert_int_equal(errno, EINVAL);
	assert_null(uf_handler_thread(shared, PS, fill, &s));
	assert_int_equal(errno, EINVAL);
	assert_null(uf_handler_thread(p, PS, NULL, &s));
	assert_int_equal(errno, EINVAL);
	p[2 * PS] = 1;
	assert_null(uf_handler_thread(p, 4 * PS, fill, &s));
	assert_int_equal(errno, EBUSY);
	assert_non_null(strstr(uf_last_error(), "uf_handler_thread"));
	/* armed in SIGBUS mode already: another uffd may not take it */
	assert_int_equal(uf_madvise_userfault(p, 2 * PS), 0);
	assert_null(uf_handler_thread(p, 2 * PS, fill, &s));
	assert_int_equal(errno, EBUSY);
	munmap(p, 4 * PS);
	munmap(shared, PS);
}

static void test_failed_fill_poisons(void **state)
{
	const size_t n = 8;
	struct src s = {.base = map_anon(n * PS, PS), .seed = 13, .fail_page = 3};
	struct uf_handler_stats st;
	struct uf_handler *h = uf_handler_thread(s.base, n * PS, fill, &s);

	assert_non_null(h);
	assert_int_equal(touch_sigbus(s.base + 3 * PS + 100), 1);
	assert_true((uintptr_t)bus_addr >> 12 == (uintptr_t)(s.base + 3 * PS) >> 12);
	assert_int_equal(touch_sigbus(s.base + 3 * PS), 1); /* stays poisoned */
	assert_int_equal(touch_sigbus(s.base + 2 * PS), 0);
	assert_int_equal(check_pattern(s.base + 2 * PS, PS, s.seed, 2 * PS), PS);
	assert_int_equal(uf_handler_stop(h, &st), 0);
	assert_int_equal(st.poisoned, 1);
	munmap(s.base, n * PS);
}

/* Stopping must not leave missing pages to be zero-filled later. */
static void test_stop_poisons_unfilled(void **state)
{
	const size_t n = 8;
	struct src s = {.base = map_anon(n * PS, PS), .seed = 14, .fail_page = SIZE_MAX};
	struct uf_handler *h = uf_handler_thread(s.base, n * PS, fill, &s);

	assert_non_null(h);
	assert_int_equal(check_pattern(s.base, PS, s.seed, 0), PS);
	assert_int_equal(uf_handler_stop(h, NULL), 0);
	assert_int_equal(touch_sigbus(s.base), 0);
	assert_int_equal(check_pattern(s.base, PS, s.seed, 0), PS);
	assert_int_equal(touch_sigbus(s.base + 5 * PS), 1);
	munmap(s.base, n * PS);
}

#define NTHREADS   4
#define CONC_PAGES 2048

struct conc {
	char *base;
	uint64_t seed;
	int idx;
};

static void *conc_worker(void *arg)
{
	struct conc *c = arg;
	size_t start = (size_t)c->idx * CONC_PAGES / NTHREADS, i, bad = 0;

	for (i = 0; i < CONC_PAGES; i++) {
		size_t pg = (start + i * 7) % CONC_PAGES;

		if (check_pattern(c->base + pg * PS, PS, c->seed, pg * PS) != PS)
			bad++;
	}
	return (void *)(uintptr_t)bad;
}

static void test_four_threads_one_range(void **state)
{
	struct src s = {.base = map_anon(CONC_PAGES * PS, PS), .seed = 15, .fail_page = SIZE_MAX};
	struct conc c[NTHREADS];
	pthread_t tid[NTHREADS];
	struct uf_handler_stats st;
	struct uf_handler *h = uf_handler_thread(s.base, CONC_PAGES * PS, fill, &s);
	int t;

	assert_non_null(h);
	for (t = 0; t < NTHREADS; t++) {
		c[t] = (struct conc){s.base, s.seed, t};
		assert_int_equal(pthread_create(&tid[t], NULL, conc_worker, &c[t]), 0);
	}
	for (t = 0; t < NTHREADS; t++) {
		void *bad;

		assert_int_equal(pthread_join(tid[t], &bad), 0);
		assert_int_equal((uintptr_t)bad, 0);
	}
	assert_int_equal(uf_handler_stop(h, &st), 0);
	print_message("4 threads: %lu fault messages, %lu copies, %lu already there\n", st.faults, st.copies, st.raced);
	assert_int_equal(st.copies, CONC_PAGES);
	assert_int_equal(st.faults, st.copies + st.raced);
	assert_int_equal(check_pattern(s.base, CONC_PAGES * PS, s.seed, 0), CONC_PAGES * PS);
	munmap(s.base, CONC_PAGES * PS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_serves_faults),
	    cmocka_unit_test(test_zero_copy_source),
	    cmocka_unit_test(test_rules),
	    cmocka_unit_test(test_failed_fill_poisons),
	    cmocka_unit_test(test_stop_poisons_unfilled),
	    cmocka_unit_test(test_four_threads_one_range),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

// SPDX-License-Identifier: MIT
/*
 * The copy gate: a reader and prefetch copiers are never inside at the same
 * time, nobody starves, and a reader waiting for a copier that sleeps inside
 * (as a preempted copier does) gets in once it leaves.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "plugin/engine/gate.h"

#define COPIERS 3
#define ROUNDS	20000

static struct lr_gate gate;
static int copiers_inside, reader_inside, violations, copies_done;

static void *copier(void *arg)
{
	(void)arg;
	for (int i = 0; i < ROUNDS; i++) {
		lr_gate_copy_enter(&gate);
		__atomic_fetch_add(&copiers_inside, 1, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&reader_inside, __ATOMIC_SEQ_CST))
			__atomic_fetch_add(&violations, 1, __ATOMIC_SEQ_CST);
		for (volatile int k = 0; k < 50; k++)
			;
		__atomic_fetch_sub(&copiers_inside, 1, __ATOMIC_SEQ_CST);
		lr_gate_copy_exit(&gate);
		__atomic_fetch_add(&copies_done, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static void test_exclusion(void **state)
{
	pthread_t th[COPIERS];

	(void)state;
	for (int i = 0; i < COPIERS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, copier, NULL), 0);
	for (int i = 0; i < ROUNDS; i++) {
		lr_gate_read_lock(&gate);
		__atomic_store_n(&reader_inside, 1, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&copiers_inside, __ATOMIC_SEQ_CST))
			__atomic_fetch_add(&violations, 1, __ATOMIC_SEQ_CST);
		for (volatile int k = 0; k < 50; k++)
			;
		__atomic_store_n(&reader_inside, 0, __ATOMIC_SEQ_CST);
		lr_gate_read_unlock(&gate);
	}
	for (int i = 0; i < COPIERS; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(violations, 0);
	assert_int_equal(copies_done, COPIERS * ROUNDS);
	assert_int_equal(gate.copiers, 0);
	assert_int_equal(gate.reading, 0);
}

static void *slow_copier(void *arg)
{
	struct timespec ts = {0, 100 * 1000 * 1000};

	(void)arg;
	lr_gate_copy_enter(&gate);
	__atomic_store_n(&copiers_inside, 1, __ATOMIC_SEQ_CST);
	nanosleep(&ts, NULL); /* longer than the reader spins: it must sleep and be woken */
	__atomic_store_n(&copiers_inside, 0, __ATOMIC_SEQ_CST);
	lr_gate_copy_exit(&gate);
	return NULL;
}

static void test_reader_waits_for_sleeping_copier(void **state)
{
	pthread_t th;

	(void)state;
	assert_int_equal(pthread_create(&th, NULL, slow_copier, NULL), 0);
	while (!__atomic_load_n(&gate.copiers, __ATOMIC_SEQ_CST))
		;
	lr_gate_read_lock(&gate);
	assert_int_equal(__atomic_load_n(&copiers_inside, __ATOMIC_SEQ_CST), 0);
	lr_gate_read_unlock(&gate);
	pthread_join(th, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_exclusion),
	    cmocka_unit_test(test_reader_waits_for_sleeping_copier),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

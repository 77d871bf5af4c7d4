// SPDX-License-Identifier: MIT
/*
 * The copy gate (gate.h): a Dekker-style pair of counters, sequentially
 * consistent, with futex sleeps.  The reader stores `reading` then loads
 * `copiers`; a copier adds to `copiers` then loads `reading`: at least one of
 * them sees the other, so a copy never enters while the reader is in.
 */
#include <limits.h>
#include <stdbool.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "plugin/engine/gate.h"
#include "plugin/engine/stats.h"

static void futex_wait(int *addr, int val)
{
	/* EAGAIN: the value changed already; EINTR: look again. Both mean re-check. */
	syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(int *addr, int n)
{
	syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/* Spin up to ns while *v is not zero; true if it still is. */
static bool spin_while_set(int *v, uint64_t ns)
{
	uint64_t until = lr_now_ns() + ns;

	while (__atomic_load_n(v, __ATOMIC_SEQ_CST)) {
		if (lr_now_ns() >= until)
			return true;
		__builtin_ia32_pause();
	}
	return false;
}

void lr_gate_copy_enter(struct lr_gate *g)
{
	for (;;) {
		__atomic_fetch_add(&g->copiers, 1, __ATOMIC_SEQ_CST);
		if (!__atomic_load_n(&g->reading, __ATOMIC_SEQ_CST))
			return;
		lr_gate_copy_exit(g); /* back out: the reader may be waiting for zero */
		/*
		 * A read lasts microseconds; a futex sleep costs the reader's
		 * unlock a wake-up of this thread on another CPU, which on a VM
		 * whose idle vCPUs halt is dearer than the read itself.
		 */
		if (!spin_while_set(&g->reading, LR_GATE_SPIN_NS))
			continue;
		/*
		 * Counted before the look at reading, and the reader clears reading
		 * before it looks at the count: one of us sees the other, so the
		 * reader's unlock costs no system call when nobody sleeps.
		 */
		__atomic_fetch_add(&g->sleepers, 1, __ATOMIC_SEQ_CST);
		while (__atomic_load_n(&g->reading, __ATOMIC_SEQ_CST))
			futex_wait(&g->reading, 1);
		__atomic_fetch_sub(&g->sleepers, 1, __ATOMIC_SEQ_CST);
	}
}

void lr_gate_copy_exit(struct lr_gate *g)
{
	if (__atomic_sub_fetch(&g->copiers, 1, __ATOMIC_SEQ_CST) == 0 && __atomic_load_n(&g->reading, __ATOMIC_SEQ_CST))
		futex_wake(&g->copiers, 1);
}

void lr_gate_read_lock_stalled(struct lr_gate *g, uint64_t spin_ns, void (*stalled)(void *), void *arg)
{
	int n;

	__atomic_store_n(&g->reading, 1, __ATOMIC_SEQ_CST);
	if (spin_while_set(&g->copiers, spin_ns) && stalled)
		stalled(arg);
	while ((n = __atomic_load_n(&g->copiers, __ATOMIC_SEQ_CST)) != 0)
		futex_wait(&g->copiers, n);
}

void lr_gate_read_lock(struct lr_gate *g)
{
	lr_gate_read_lock_stalled(g, LR_GATE_SPIN_NS, NULL, NULL);
}

void lr_gate_read_unlock(struct lr_gate *g)
{
	__atomic_store_n(&g->reading, 0, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&g->sleepers, __ATOMIC_SEQ_CST))
		futex_wake(&g->reading, INT_MAX);
}

/* SPDX-License-Identifier: MIT */
/*
 * A task's copy gate: prefetch copies against the fault thread's read() of
 * the task's uffd.  No prefetch UFFDIO_COPY may *start* while the fault thread
 * reads and applies events: once a REMOVE is read, madvise() goes on to zap,
 * and a copy started after that would leave stale image data in a range that
 * must read zero.  Copies running when a read starts are harmless (the kernel
 * makes an event wait for running copies and fails later ones with EAGAIN
 * until it is read), but they cannot be told apart from copies not yet
 * entered, so the reader waits for them.
 *
 * Unlike a pthread rwlock, the reader announces itself first (no new copy
 * enters) and spins for a short while before sleeping: a copy inside lasts
 * microseconds (at most 64 KiB), a futex sleep and wake-up across vCPUs costs
 * far more (plugin/README.md), and it would be paid on every fault.
 */
#ifndef LAZYRESTORE_ENGINE_GATE_H
#define LAZYRESTORE_ENGINE_GATE_H

#include <stdint.h>

/* Longer than one piece of prefetch copy inside the gate (<= 64 KiB), shorter than a sleep and wake-up. */
#define LR_GATE_SPIN_NS 30000

struct lr_gate {
	int copiers;  /* prefetch copies inside */
	int reading;  /* the fault thread is in, or wants in */
	int sleepers; /* copiers asleep on reading: the reader wakes them only if there are any */
};

void lr_gate_copy_enter(struct lr_gate *g);
void lr_gate_copy_exit(struct lr_gate *g);
void lr_gate_read_lock(struct lr_gate *g);
/*
 * The same, spinning spin_ns; stalled(arg) is called once if the copiers
 * outlast the spin (0: a copier that cannot run while we spin, at once).
 */
void lr_gate_read_lock_stalled(struct lr_gate *g, uint64_t spin_ns, void (*stalled)(void *), void *arg);
void lr_gate_read_unlock(struct lr_gate *g);

/* A copier inside: does the fault thread wait for it?  (Then it leaves and enters again.) */
static inline int lr_gate_reader_waits(const struct lr_gate *g)
{
	return __atomic_load_n(&g->reading, __ATOMIC_SEQ_CST);
}

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The uffd message journal, in memory shared by the supervisor and the engine.
 * The engine read()s each task's uffd messages straight into the task's area,
 * so a message the kernel handed over is on record even if the engine is
 * SIGKILLed the next instant; a restarted engine replays the events (fork,
 * remap, remove, unmap) on ranges rebuilt from the images.  Areas start
 * zeroed and no uffd message has event 0, so the end of a journal is the
 * first zero entry, committed or not.  Batches of faults alone are
 * overwritten by the next read, so the journal grows with events only.
 */
#ifndef LAZYRESTORE_JOURNAL_H
#define LAZYRESTORE_JOURNAL_H

#include <linux/userfaultfd.h>
#include <stdbool.h>
#include <stdint.h>

#define LR_JOURNAL_TASKS 256
#define LR_JOURNAL_MSGS	 (256U << 10) /* per task: 8 MiB of messages */

struct lr_journal_head {
	uint32_t finished;		 /* restore-finished marker came */
	uint32_t full[LR_JOURNAL_TASKS]; /* a task's area overflowed: no restart */
};

struct lr_journal {
	struct lr_journal_head *head;
	struct uffd_msg *msgs; /* LR_JOURNAL_TASKS areas of LR_JOURNAL_MSGS */
	int fd;
};

int lr_journal_create(struct lr_journal *j);
void lr_journal_destroy(struct lr_journal *j);

static inline struct uffd_msg *lr_journal_area(const struct lr_journal *j, unsigned idx)
{
	return j->msgs + (uint64_t)idx * LR_JOURNAL_MSGS;
}

/* Messages on record for task idx (up to the first zero entry). */
uint64_t lr_journal_len(const struct lr_journal *j, unsigned idx);

#endif

// SPDX-License-Identifier: MIT
/*
 * Resuming after the previous engine was killed.  Nothing of its memory is
 * trusted: ranges come from the images again, the journal's events are
 * replayed on them in order (a FORK gives the child the parent's ranges at
 * that point), pages already installed are learned from EEXIST as they are
 * met, and every task is woken once so that threads whose fault message died
 * with the old engine fault again.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>

#include "plugin/engine/internal.h"
#include "plugin/log/log.h"

/* All of user space: UFFDIO_WAKE needs no registration, only a valid range. */
#define WAKE_START 0x10000ULL
#define WAKE_END   (1ULL << 47)

/* Index of the task that the FORK message at pos of task p created, or -1. */
static long forked_child(const struct lr_resume_task *t, size_t nr, size_t p, uint64_t pos)
{
	for (size_t i = 0; i < nr; i++)
		if (t[i].parent == (int)p && t[i].fork_pos == pos)
			return (long)i;
	return -1;
}

static int replay(struct lr_engine *e, const struct lr_resume_task *rt, size_t nr, struct lr_task **tasks, size_t i)
{
	const struct lr_journal *j = e->o.journal;
	const struct uffd_msg *a = lr_journal_area(j, (unsigned)i);
	uint64_t len = lr_journal_len(j, (unsigned)i);
	struct lr_task *t = tasks[i];

	if (j->head->full[i]) {
		pr_err("task %u: its uffd journal overflowed before the crash", t->src_pid);
		return -1;
	}
	for (uint64_t k = 0; k < len; k++) {
		struct lr_task *child = NULL;

		if (a[k].event == UFFD_EVENT_PAGEFAULT)
			continue;
		if (a[k].event == UFFD_EVENT_FORK) {
			long c = forked_child(rt, nr, i, k);
			if (c < 0) {
				pr_err("task %u: the uffd of a child it forked died with the engine", t->src_pid);
				return -1;
			}
			child = tasks[c];
			child->src_pid = t->src_pid;
		}
		if (lr_apply_event(e, t, &a[k], child))
			return -1;
	}
	t->jpos = len;
	return 0;
}

int lr_engine_resume(struct lr_engine *e, const struct lr_resume_task *rt, size_t nr)
{
	struct lr_task **tasks = calloc(nr ? nr : 1, sizeof(*tasks));
	char err[512];
	int ret = -1;

	if (!tasks || !e->o.journal)
		goto out;
	pthread_mutex_lock(&e->lock);
	/* Every task first, at its old index; then the journals in index order. */
	for (size_t i = 0; i < nr; i++) {
		tasks[i] = lr_task_new(e, rt[i].uffd, rt[i].vpid, rt[i].vpid, rt[i].real_pid, -2, 0);
		if (!tasks[i] || tasks[i]->idx != i)
			goto unlock;
		if (rt[i].parent >= 0)
			continue;
		if (!rt[i].mm ||
		    lr_ranges_build_for(&tasks[i]->pending, rt[i].mm, page_source_async(e->src), err, sizeof(err))) {
			pr_err("resume of task %u: %s", rt[i].vpid, rt[i].mm ? err : "no images");
			goto unlock;
		}
		e->stats.total_pages += tasks[i]->pending.pages;
		lr_thp_add_task(e, tasks[i], rt[i].mm);
	}
	for (size_t i = 0; i < nr; i++)
		if (replay(e, rt, nr, tasks, i))
			goto unlock;
	ret = 0;
unlock:
	pthread_mutex_unlock(&e->lock);
	if (ret)
		goto out;
	uint64_t left = 0;
	for (size_t i = 0; i < nr; i++) {
		struct uffdio_range r = {.start = WAKE_START, .len = WAKE_END - WAKE_START};
		if (ioctl(tasks[i]->uffd, UFFDIO_WAKE, &r) && errno != ESRCH)
			pr_warn("task %u: wake after restart: %m", tasks[i]->src_pid);
		left += tasks[i]->pending.pages;
	}
	pr_info("resumed %zu tasks from the images and the journal: %llu pages not yet seen "
		"installed",
		nr, (unsigned long long)left);
	lr_engine_restore_finished(e); /* no restore to watch: over at once */
out:
	free(tasks);
	return ret;
}

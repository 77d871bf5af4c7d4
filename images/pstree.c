// SPDX-License-Identifier: MIT
/* pstree.img: the task tree, and each task's state from core-<pid>.img. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "images/internal.h"
#include "core.pb-c.h"
#include "pstree.pb-c.h"

static int read_task_state(struct img_dir *d, struct img_task *t, struct img_err *err)
{
	CoreEntry *ce = NULL;
	struct img_file f;
	size_t off;
	char name[64];
	int ret = -1;

	snprintf(name, sizeof(name), "core-%u.img", t->pid);
	if (img_file_open(d, name, IMG_CORE_MAGIC, &f, NULL, err))
		return -1;
	if (img_file_next_msg(&f, &core_entry__descriptor, true, (void **)&ce, &off, err) < 0)
		goto out;
	if (!ce->tc) {
		img_fail(err, f.name, off, "core_entry has no task_core (tc)");
		goto out;
	}
	t->state = ce->tc->task_state;
	if (t->state != IMG_TASK_ALIVE && t->state != IMG_TASK_DEAD && t->state != IMG_TASK_STOPPED) {
		img_fail(err, f.name, off, "unknown task_state %d", t->state);
		goto out;
	}
	ret = 0;
out:
	if (ce)
		core_entry__free_unpacked(ce, NULL);
	img_file_close(&f);
	return ret;
}

/* Append the task, and in offs[] the file offset of its record (for check_tree's errors). */
static int add_task(struct img_task **tasks, size_t **offs, size_t *nr, size_t *cap, const PstreeEntry *pe, size_t off)
{
	struct img_task *t;

	if (*nr == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		struct img_task *n = realloc(*tasks, ncap * sizeof(**tasks));
		size_t *o;

		if (!n)
			return -1;
		*tasks = n;
		o = realloc(*offs, ncap * sizeof(**offs));
		if (!o)
			return -1;
		*offs = o;
		*cap = ncap;
	}
	(*offs)[*nr] = off;
	t = &(*tasks)[*nr];
	memset(t, 0, sizeof(*t));
	t->pid = pe->pid;
	t->ppid = pe->ppid;
	t->pgid = pe->pgid;
	t->sid = pe->sid;
	if (pe->n_threads) {
		t->threads = malloc(pe->n_threads * sizeof(uint32_t));
		if (!t->threads)
			return -1;
		memcpy(t->threads, pe->threads, pe->n_threads * sizeof(uint32_t));
		t->nr_threads = pe->n_threads;
	}
	(*nr)++;
	return 0;
}

/* Checks of one record on its own; the checks across records are in check_tree(). */
static int check_task(const struct img_file *f, size_t off, size_t nr, const PstreeEntry *pe, struct img_err *err)
{
	if (pe->pid == 0 || pe->pid > INT32_MAX)
		return img_fail(err, f->name, off, "invalid pid %u", pe->pid);
	if (nr == 0 && pe->ppid != 0)
		return img_fail(err, f->name, off, "root task %u has parent %u, want 0", pe->pid, pe->ppid);
	if (pe->n_threads > IMG_MAX_THREADS)
		return img_fail(err, f->name, off, "task %u claims %zu threads", pe->pid, pe->n_threads);
	return 0;
}

struct pid_ix {
	uint32_t pid, ix;
};

static int cmp_pid_ix(const void *a, const void *b)
{
	const struct pid_ix *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->ix < y->ix ? -1 : x->ix > y->ix;
}

/* Index in file order of the first task with this pid, or nr: a binary search of the sorted pairs. */
static size_t first_with_pid(const struct pid_ix *by_pid, size_t nr, uint32_t pid)
{
	size_t lo = 0, hi = nr;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (by_pid[mid].pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < nr && by_pid[lo].pid == pid ? by_pid[lo].ix : nr;
}

/*
 * No pid twice, every parent listed before its child.  Sorted, so that a
 * hostile pstree of a million tasks costs n log n, not n^2; the record
 * reported is the first one in file order that breaks a rule.
 */
static int check_tree(const struct img_file *f, const struct img_task *t, const size_t *offs, size_t nr,
		      struct img_err *err)
{
	struct pid_ix *by_pid;
	size_t bad = nr, dup;

	by_pid = malloc(nr * sizeof(*by_pid));
	if (!by_pid)
		return img_fail(err, f->name, 0, "out of memory for %zu tasks", nr);
	for (size_t i = 0; i < nr; i++)
		by_pid[i] = (struct pid_ix){t[i].pid, (uint32_t)i};
	qsort(by_pid, nr, sizeof(*by_pid), cmp_pid_ix);
	for (size_t i = 1; i < nr; i++)
		if (by_pid[i].pid == by_pid[i - 1].pid && by_pid[i].ix < bad)
			bad = by_pid[i].ix;
	dup = bad;
	for (size_t i = 1; i < dup; i++)
		if (first_with_pid(by_pid, nr, t[i].ppid) >= i) {
			bad = i;
			break;
		}
	free(by_pid);
	if (bad == nr)
		return 0;
	if (bad == dup)
		return img_fail(err, f->name, offs[bad], "duplicate pid %u", t[bad].pid);
	return img_fail(err, f->name, offs[bad], "task %u: parent %u is not listed before it", t[bad].pid, t[bad].ppid);
}

int img_read_pstree(struct img_dir *d, struct img_task **tasks_out, size_t *nr_out, struct img_err *err)
{
	struct img_task *tasks = NULL;
	size_t nr = 0, cap = 0, off, *offs = NULL;
	PstreeEntry *pe;
	struct img_file f;
	int r;

	if (img_file_open(d, "pstree.img", IMG_PSTREE_MAGIC, &f, NULL, err))
		return -1;
	while ((r = img_file_next_msg(&f, &pstree_entry__descriptor, false, (void **)&pe, &off, err)) == 1) {
		if (nr >= IMG_MAX_TASKS) {
			img_fail(err, f.name, off, "more than %u tasks", IMG_MAX_TASKS);
			r = -1;
		} else {
			r = check_task(&f, off, nr, pe, err);
			if (!r && add_task(&tasks, &offs, &nr, &cap, pe, off))
				r = img_fail(err, f.name, off, "out of memory");
		}
		pstree_entry__free_unpacked(pe, NULL);
		if (r)
			goto fail;
	}
	if (r < 0)
		goto fail;
	if (nr == 0) {
		img_fail(err, f.name, f.pos, "no tasks");
		goto fail;
	}
	if (check_tree(&f, tasks, offs, nr, err))
		goto fail;
	free(offs);
	img_file_close(&f);
	for (size_t i = 0; i < nr; i++)
		if (read_task_state(d, &tasks[i], err)) {
			img_tasks_free(tasks, nr);
			return -1;
		}
	*tasks_out = tasks;
	*nr_out = nr;
	return 0;
fail:
	free(offs);
	img_file_close(&f);
	img_tasks_free(tasks, nr);
	return -1;
}

void img_tasks_free(struct img_task *tasks, size_t nr)
{
	for (size_t i = 0; i < nr; i++)
		free(tasks[i].threads);
	free(tasks);
}

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
	const uint8_t *rec;
	size_t len, off;
	char name[64];
	int r, ret = -1;

	snprintf(name, sizeof(name), "core-%u.img", t->pid);
	if (img_file_open(d, name, IMG_CORE_MAGIC, &f, NULL, err))
		return -1;
	r = img_file_next(&f, &rec, &len, &off, err);
	if (r < 0)
		goto out;
	if (r == 0) {
		img_fail(err, f.name, f.pos, "no core record");
		goto out;
	}
	ce = core_entry__unpack(NULL, len, rec);
	if (!ce) {
		img_fail(err, f.name, off, "malformed core_entry record (%zu bytes)", len);
		goto out;
	}
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

static int add_task(struct img_task **tasks, size_t *nr, size_t *cap, const PstreeEntry *pe)
{
	struct img_task *t;

	if (*nr == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		struct img_task *n = realloc(*tasks, ncap * sizeof(**tasks));

		if (!n)
			return -1;
		*tasks = n;
		*cap = ncap;
	}
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

static int check_task(const struct img_file *f, size_t off, const struct img_task *tasks, size_t nr,
		      const PstreeEntry *pe, struct img_err *err)
{
	if (pe->pid == 0 || pe->pid > INT32_MAX)
		return img_fail(err, f->name, off, "invalid pid %u", pe->pid);
	if (nr == 0 && pe->ppid != 0)
		return img_fail(err, f->name, off, "root task %u has parent %u, want 0", pe->pid, pe->ppid);
	if (pe->n_threads > IMG_MAX_THREADS)
		return img_fail(err, f->name, off, "task %u claims %zu threads", pe->pid, pe->n_threads);
	for (size_t i = 0; i < nr; i++)
		if (tasks[i].pid == pe->pid)
			return img_fail(err, f->name, off, "duplicate pid %u", pe->pid);
	if (nr > 0) {
		size_t i;

		for (i = 0; i < nr && tasks[i].pid != pe->ppid; i++)
			;
		if (i == nr)
			return img_fail(err, f->name, off, "task %u: parent %u is not listed before it", pe->pid,
					pe->ppid);
	}
	return 0;
}

int img_read_pstree(struct img_dir *d, struct img_task **tasks_out, size_t *nr_out, struct img_err *err)
{
	struct img_task *tasks = NULL;
	size_t nr = 0, cap = 0, len, off;
	const uint8_t *rec;
	struct img_file f;
	int r;

	if (img_file_open(d, "pstree.img", IMG_PSTREE_MAGIC, &f, NULL, err))
		return -1;
	while ((r = img_file_next(&f, &rec, &len, &off, err)) == 1) {
		PstreeEntry *pe = pstree_entry__unpack(NULL, len, rec);

		if (!pe) {
			img_fail(err, f.name, off, "malformed pstree_entry record (%zu bytes)", len);
			goto fail;
		}
		if (nr >= IMG_MAX_TASKS) {
			img_fail(err, f.name, off, "more than %u tasks", IMG_MAX_TASKS);
			r = -1;
		} else {
			r = check_task(&f, off, tasks, nr, pe, err);
			if (!r && add_task(&tasks, &nr, &cap, pe))
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

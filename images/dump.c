// SPDX-License-Identifier: MIT
/* A dump as the servers need it: pstree, every live task's mm, the zombies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "images/image.h"
#include "images/internal.h"

void img_dump_free(struct img_dump *d)
{
	for (size_t i = 0; d->mms && i < d->nr_alive; i++)
		img_mm_free(&d->mms[i]);
	free(d->mms);
	free(d->alive);
	free(d->zombies);
	if (d->tasks)
		img_tasks_free(d->tasks, d->nr_tasks);
	if (d->dir)
		img_dir_close(d->dir);
	memset(d, 0, sizeof(*d));
}

int img_dump_load(const char *path, struct img_dump *d, struct img_err *err)
{
	struct img_inventory inv;

	memset(d, 0, sizeof(*d));
	if (img_dir_open(path, &d->dir, err) || img_read_inventory(d->dir, &inv, err))
		goto fail;
	img_inventory_free(&inv);
	if (img_read_pstree(d->dir, &d->tasks, &d->nr_tasks, err))
		goto fail;
	d->alive = calloc(d->nr_tasks + 1, sizeof(uint32_t));
	d->zombies = calloc(d->nr_tasks + 1, sizeof(uint32_t));
	d->mms = calloc(d->nr_tasks + 1, sizeof(struct img_mm));
	if (!d->alive || !d->zombies || !d->mms) {
		snprintf(err->msg, sizeof(err->msg), "%s: out of memory for %zu tasks", path, d->nr_tasks);
		goto fail;
	}
	for (size_t i = 0; i < d->nr_tasks; i++) {
		const struct img_task *t = &d->tasks[i];
		if (t->state == IMG_TASK_DEAD) {
			d->zombies[d->nr_zombies++] = t->pid;
			continue;
		}
		if (img_read_mm(d->dir, t->pid, &d->mms[d->nr_alive], err))
			goto fail;
		d->alive[d->nr_alive++] = t->pid;
	}
	return 0;
fail:
	img_dump_free(d);
	return -1;
}

const struct img_mm *img_dump_mm(const struct img_dump *d, uint32_t pid)
{
	for (size_t i = 0; i < d->nr_alive; i++)
		if (d->alive[i] == pid)
			return &d->mms[i];
	return NULL;
}

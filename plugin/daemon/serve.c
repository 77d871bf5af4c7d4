// SPDX-License-Identifier: MIT
/*
 * The daemon's sequence, as `criu lazy-pages` does it: open the images, chdir
 * to the work dir, listen, report readiness on --status-fd, take one restore's
 * hand-off (in its own thread, so faults are served while tasks still arrive)
 * and run the engine until everything is resident.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "images/image.h"
#include "plugin/daemon/daemon.h"
#include "plugin/engine/engine.h"
#include "plugin/handoff/handoff.h"
#include "plugin/log/log.h"
#include "plugin/source/source.h"

struct dump {
	struct img_dir *dir;
	struct img_task *tasks;
	size_t nr_tasks;
	uint32_t *alive, *zombies;
	size_t nr_alive, nr_zombies;
	struct img_mm *mms; /* per alive task */
};

struct session {
	struct dump *d;
	struct lr_engine *e;
	int cfd;
	pid_t peer;
	int ret;
};

static void dump_free(struct dump *d)
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
}

static int dump_load(struct dump *d, const char *path)
{
	struct img_inventory inv;
	struct img_err err;

	memset(d, 0, sizeof(*d));
	if (img_dir_open(path, &d->dir, &err) || img_read_inventory(d->dir, &inv, &err))
		goto fail;
	img_inventory_free(&inv);
	if (img_read_pstree(d->dir, &d->tasks, &d->nr_tasks, &err))
		goto fail;
	d->alive = calloc(d->nr_tasks + 1, sizeof(uint32_t));
	d->zombies = calloc(d->nr_tasks + 1, sizeof(uint32_t));
	d->mms = calloc(d->nr_tasks + 1, sizeof(struct img_mm));
	if (!d->alive || !d->zombies || !d->mms) {
		pr_err("out of memory for %zu tasks", d->nr_tasks);
		return -1;
	}
	for (size_t i = 0; i < d->nr_tasks; i++) {
		const struct img_task *t = &d->tasks[i];
		if (t->state == IMG_TASK_DEAD) {
			d->zombies[d->nr_zombies++] = t->pid;
			continue;
		}
		if (img_read_mm(d->dir, t->pid, &d->mms[d->nr_alive], &err))
			goto fail;
		d->alive[d->nr_alive++] = t->pid;
	}
	return 0;
fail:
	pr_err("%s", err.msg);
	return -1;
}

static const struct img_mm *find_mm(const struct dump *d, uint32_t vpid)
{
	for (size_t i = 0; i < d->nr_alive; i++)
		if (d->alive[i] == vpid)
			return &d->mms[i];
	return NULL;
}

static int on_task(void *arg, uint32_t vpid, pid_t real_pid, int uffd)
{
	struct session *s = arg;
	const struct img_mm *mm = find_mm(s->d, vpid);

	if (!mm || lr_engine_add_task(s->e, vpid, real_pid, uffd, mm)) {
		close(uffd);
		return -1;
	}
	return 0;
}

static void on_finished(void *arg)
{
	struct session *s = arg;
	lr_engine_restore_finished(s->e);
}

static void on_failed(void *arg, const char *why)
{
	struct session *s = arg;
	lr_engine_fail(s->e, why);
}

static void *handoff_thread(void *arg)
{
	struct session *s = arg;
	const struct lr_handoff_ops ops = {on_task, on_finished, on_failed};
	struct lr_handoff_expect x = {s->d->alive, s->d->nr_alive, s->d->zombies, s->d->nr_zombies};

	s->ret = lr_handoff_receive(s->cfd, s->peer, &x, &ops, s);
	return NULL;
}

static int status_ready(int fd)
{
	char zero = 0;

	if (fd < 0)
		return 0;
	while (write(fd, &zero, 1) != 1) {
		if (errno != EINTR) {
			pr_perror("can't write the status byte to fd %d", fd);
			return -1;
		}
	}
	close(fd);
	return 0;
}

static int serve(struct dump *d, int lfd, const struct lr_daemon_opts *o)
{
	struct img_err err;
	struct page_source *src = file_source_open(d->dir, d->mms, d->nr_alive, &err);
	struct session s = {.d = d, .cfd = -1};
	struct lr_engine_opts eo = {.workers = o->workers, .progress = o->progress};
	pthread_t th;
	int ret = -1;

	if (!src) {
		pr_err("%s", err.msg);
		return -1;
	}
	if (status_ready(o->status_fd))
		goto out;
	s.cfd = lr_handoff_accept(lfd, &s.peer);
	close(lfd);
	if (s.cfd < 0)
		goto out;
	pr_info("restore connected (pid %d)", s.peer);
	s.e = lr_engine_create(src, &eo);
	if (!s.e || pthread_create(&th, NULL, handoff_thread, &s)) {
		pr_err("can't start serving the restore");
		goto out;
	}
	ret = lr_engine_run(s.e);
	/* A failed engine leaves the hand-off blocked: unblock it; criu then sees EPIPE. */
	shutdown(s.cfd, SHUT_RDWR);
	pthread_join(th, NULL);
	if (s.ret)
		ret = -1;
	lr_stats_log_summary(lr_engine_stats(s.e));
	if (o->stats_file && lr_stats_write_json(lr_engine_stats(s.e), o->stats_file))
		ret = -1;
out:
	if (s.cfd >= 0)
		close(s.cfd);
	lr_engine_destroy(s.e);
	page_source_destroy(src);
	return ret;
}

int lr_daemon_run(const struct lr_daemon_opts *o)
{
	char images[PATH_MAX];
	struct dump d;
	int lfd, ret = -1;

	if (!realpath(o->images_dir, images)) {
		fprintf(stderr, "Error: images dir %s: %s\n", o->images_dir, strerror(errno));
		return -1;
	}
	if (chdir(o->work_dir ? o->work_dir : images)) {
		fprintf(stderr, "Error: work dir %s: %s\n", o->work_dir ? o->work_dir : images, strerror(errno));
		return -1;
	}
	if (lr_log_open(o->log_file))
		return -1;
	lr_log_set_level(o->level);
	pr_info("lazy-pages: serving %s", images);
	if (dump_load(&d, images))
		goto out;
	lfd = lr_handoff_listen();
	if (lfd < 0)
		goto out;
	ret = serve(&d, lfd, o);
out:
	dump_free(&d);
	pr_info("lazy-pages: exit %d", ret ? 1 : 0);
	lr_log_close();
	return ret;
}

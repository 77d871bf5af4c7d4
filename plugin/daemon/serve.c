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
#include <sys/syscall.h>
#include <unistd.h>

#include "images/image.h"
#include "plugin/daemon/daemon.h"
#include "plugin/engine/engine.h"
#include "plugin/engine/ws.h"
#include "plugin/handoff/handoff.h"
#include "plugin/log/log.h"
#include "plugin/source/net.h"
#include "plugin/source/source.h"
#include "plugin/supervisor/supervisor.h"

struct dump {
	struct img_dump img; /* the dump itself (images/) */
	struct page_source_choice choice;
	bool workers_calm; /* workers wait for a calm spell: the option or the sibling probe */
	char workers_why[200];
	unsigned workers; /* --workers, or its default for where the fault thread runs */
	bool follow;	  /* the fault thread follows the faulting thread's CPU: the option or the probe */
	char follow_why[256];
};

struct session {
	struct dump *d;
	struct lr_engine *e;
	int cfd;
	pid_t peer;
	int ret;
};

static int dump_load(struct dump *d, const char *path)
{
	struct img_err err;

	memset(d, 0, sizeof(*d));
	if (img_dump_load(path, &d->img, &err)) {
		pr_err("%s", err.msg);
		return -1;
	}
	return 0;
}

static const struct img_mm *find_mm(const struct dump *d, uint32_t vpid)
{
	return img_dump_mm(&d->img, vpid);
}

static int on_task(void *arg, uint32_t vpid, pid_t real_pid, int uffd)
{
	struct session *s = arg;
	const struct img_mm *mm = find_mm(s->d, vpid);

	if (!mm) {
		close(uffd);
		return -1;
	}
	return lr_engine_add_task(s->e, vpid, real_pid, uffd, mm);
}

static void on_finished(void *arg)
{
	struct session *s = arg;
	lr_engine_restore_finished(s->e);
}

/* --ws-hold auto, where it holds: the bound of the wait after the restore-finished marker */
#define WS_HOLD_AUTO_MS 1000U

/* Engine lock held (ws.c): the working set is in, or the hold's bound passed. */
static void release_tasks(void *arg)
{
	struct session *s = arg;
	lr_handoff_release(s->cfd, false);
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
	struct lr_handoff_expect x = {s->d->img.alive, s->d->img.nr_alive, s->d->img.zombies, s->d->img.nr_zombies};

	s->ret = lr_handoff_receive(s->cfd, s->peer, &x, &ops, s);
	return NULL;
}

/*
 * `criu restore -d` exits once it has detached from the restored tasks: then
 * the restore is over (engine.h).  A criu that stays (no -d) or a peer we
 * can't watch leaves it to the engine's time bound.
 */
static int watch_restore(struct lr_engine *e, pid_t peer)
{
	int fd = peer > 0 ? (int)syscall(SYS_pidfd_open, peer, 0) : -1;

	if (fd < 0) {
		pr_warn("can't watch the restore (pid %d) for its end: %s", peer,
			peer > 0 ? strerror(errno) : "pid unknown");
		return 0;
	}
	return lr_engine_watch_restore(e, fd);
}

static int finish(struct lr_engine *e, const struct lr_daemon_opts *o, int ret)
{
	lr_ws_save(e); /* a working set not written is no error of the restore */
	lr_stats_log_summary(lr_engine_stats(e));
	if (o->stats_file && lr_stats_write_json(lr_engine_stats(e), o->stats_file))
		ret = -1;
	return ret;
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

/*
 * The engine's page source: the images' pages files, or a page server.  The
 * client's thread must live in the engine's process, so this runs there.
 */
static struct page_source *open_source(struct dump *d, const struct lr_daemon_opts *o)
{
	struct page_source *src;

	if (o->page_server) {
		struct psc_opts po = {.host = o->address,
				      .port = o->port,
				      .wire = o->wire,
				      .urgent_auto = true,
				      .reconnect = true,
				      .tls = &o->tls};
		char err[512];

		src = net_source_open(&po, err, sizeof(err));
		if (!src)
			pr_err("page server: %s", err);
		else
			pr_info("page source: %s", src->choice.why);
		return src;
	}
	struct img_err err;

	src = file_source_open(d->img.dir, d->img.mms, d->img.nr_alive, &d->choice, &err);
	if (!src)
		pr_err("%s", err.msg);
	return src;
}

static int new_task(void *arg, unsigned idx, int uffd, uint32_t vpid, pid_t real_pid, int parent, uint64_t fork_pos)
{
	struct lr_sv_task t = {uffd, vpid, real_pid, parent, fork_pos};
	return lr_sv_send_task(arg, idx, &t);
}

static struct lr_engine_opts engine_opts(const struct dump *d, const struct lr_daemon_opts *o)
{
	return (struct lr_engine_opts){.workers = d->workers,
				       .prefetch_step = o->prefetch_step,
				       .progress = o->progress,
				       .workers_calm = d->workers_calm,
				       .workers_why = d->workers_why,
				       .follow = d->follow,
				       .follow_why = d->follow_why};
}

/* Serve one restore's hand-off and memory in this process. */
static int serve(struct dump *d, int cfd, pid_t peer, const struct lr_daemon_opts *o, struct lr_sv *sv)
{
	struct page_source *src = open_source(d, o);
	struct session s = {.d = d, .cfd = cfd, .peer = peer};
	struct lr_engine_opts eo = engine_opts(d, o);
	pthread_t th;
	int ret = -1;

	if (sv) {
		eo.new_task = new_task;
		eo.arg = sv;
		eo.journal = &sv->j;
	}
	if (!src)
		return -1;
	s.e = lr_engine_create(src, &eo);
	if (!s.e || lr_ws_setup(s.e, d->img.dir, o->record_ws, o->record_ws_for) || watch_restore(s.e, peer)) {
		pr_err("can't start serving the restore");
		goto out;
	}
	/* before the hand-off thread: criu reads the request only after the end marker */
	if (lr_ws_replays(s.e)) {
		/* auto: where copies beside a faulting program slow it, the set's would too (bench/apps/README.md) */
		bool slows = d->workers_calm && !d->follow;
		unsigned hold = o->ws_hold_ms >= 0 ? (unsigned)o->ws_hold_ms : slows ? WS_HOLD_AUTO_MS : 0;
		if (!hold)
			pr_info("working set: installed while the tasks run (%s)",
				o->ws_hold_ms >= 0 ? "--ws-hold 0"
						   : "auto: copies beside faults do not slow them here");
		else if (!lr_handoff_hold(cfd))
			lr_ws_hold_tasks(s.e, hold, release_tasks, &s);
	}
	if (pthread_create(&th, NULL, handoff_thread, &s)) {
		pr_err("can't start serving the restore");
		goto out;
	}
	ret = lr_engine_run(s.e);
	/* A failed engine leaves the hand-off blocked: unblock it; criu then sees EPIPE. */
	shutdown(s.cfd, SHUT_RDWR);
	pthread_join(th, NULL);
	if (s.ret)
		ret = -1;
	ret = finish(s.e, o, ret);
out:
	lr_engine_destroy(s.e);
	page_source_destroy(src);
	return ret;
}

/* A new engine after the previous one was killed: everything from the images and the journal. */
static int resume(struct dump *d, const struct lr_daemon_opts *o, struct lr_sv *sv)
{
	struct page_source *src = open_source(d, o);
	struct lr_engine_opts eo = engine_opts(d, o);
	struct lr_resume_task rt[LR_JOURNAL_TASKS];
	struct lr_engine *e = NULL;
	int ret = -1;

	if (!src)
		return -1;
	eo.new_task = new_task;
	eo.arg = sv;
	eo.journal = &sv->j;
	for (unsigned i = 0; i < sv->nr_tasks; i++) {
		const struct lr_sv_task *t = &sv->tasks[i];
		rt[i] = (struct lr_resume_task){t->uffd,   t->vpid,	t->real_pid,
						t->parent, t->fork_pos, t->parent < 0 ? find_mm(d, t->vpid) : NULL};
	}
	e = lr_engine_create(src, &eo);
	if (!e || lr_engine_resume(e, rt, sv->nr_tasks)) {
		if (e)
			lr_engine_fail(e, "can't resume after the engine was killed");
		goto out;
	}
	ret = finish(e, o, lr_engine_run(e));
out:
	lr_engine_destroy(e);
	page_source_destroy(src);
	return ret;
}

struct sv_ctx {
	struct dump *d;
	int cfd;
	pid_t peer;
	const struct lr_daemon_opts *o;
};

static int engine_child(void *arg, struct lr_sv *sv, bool resuming)
{
	struct sv_ctx *c = arg;

	if (resuming) { /* criu may still hold the tasks for the engine that died; this one replays no working set */
		lr_handoff_release(c->cfd, true);
		return resume(c->d, c->o, sv) ? 1 : 0;
	}
	return serve(c->d, c->cfd, c->peer, c->o, sv) ? 1 : 0;
}

static int accept_and_serve(struct dump *d, int lfd, const struct lr_daemon_opts *o)
{
	struct sv_ctx c = {.d = d, .o = o};
	struct lr_sv sv;
	int ret;

	if (status_ready(o->status_fd))
		return -1;
	c.cfd = lr_handoff_accept(lfd, &c.peer);
	close(lfd);
	if (c.cfd < 0)
		return -1;
	pr_info("restore connected (pid %d)", c.peer);
	if (o->no_supervisor) {
		ret = serve(d, c.cfd, c.peer, o, NULL);
		close(c.cfd);
		return ret;
	}
	if (lr_sv_init(&sv)) {
		close(c.cfd);
		return -1;
	}
	ret = lr_supervise(&sv, engine_child, &c, c.cfd) ? -1 : 0;
	lr_sv_fini(&sv);
	return ret;
}
/*
 * Where the fault thread runs (--fault-cpu, else the probe), and whether
 * workers copy while faults come (--workers-beside-faults, else the sibling
 * probe): local pages only, and only with workers.  A fault thread that
 * follows the program keeps the workers off its CPU, which settles the second.
 */
static void choose_cpus(struct dump *d, const struct lr_daemon_opts *o)
{
	if (!o->workers)
		return;
	if (o->fault_cpu >= 0) {
		d->follow = o->fault_cpu;
		snprintf(d->follow_why, sizeof(d->follow_why), "--fault-cpu %s", d->follow ? "follow" : "any");
	} else {
		d->follow = lr_probe_follow(d->follow_why, sizeof(d->follow_why));
	}
	pr_info("fault thread: %s", d->follow_why);
	if (d->follow && !o->workers_given) /* one in its CPU's idle time, one on the others */
		d->workers = 2;
	if (d->follow) {
		snprintf(d->workers_why, sizeof(d->workers_why),
			 "workers share the CPUs but the fault thread's, which follows the program");
	} else if (o->workers_beside_faults >= 0) {
		d->workers_calm = !o->workers_beside_faults;
		snprintf(d->workers_why, sizeof(d->workers_why), "--workers-beside-faults %s",
			 d->workers_calm ? "no" : "yes");
	} else {
		d->workers_calm = !lr_probe_workers_share(d->workers_why, sizeof(d->workers_why));
	}
	pr_info("prefetch workers: %s", d->workers_why);
}

int lr_daemon_run(const struct lr_daemon_opts *o)
{
	char images[PATH_MAX];
	struct dump d = {0};
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
	d.workers = o->workers;
	/* before readiness: the restore must not wait for it */
	if (!o->page_server) {
		file_source_probe(d.img.dir, d.img.mms, d.img.nr_alive, o->page_source, &d.choice);
		pr_info("page source: %s", d.choice.why);
		choose_cpus(&d, o);
	}
	lfd = lr_handoff_listen();
	if (lfd < 0)
		goto out;
	ret = accept_and_serve(&d, lfd, o);
out:
	img_dump_free(&d.img);
	pr_info("lazy-pages: exit %d", ret ? 1 : 0);
	lr_log_close();
	return ret;
}

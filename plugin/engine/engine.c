// SPDX-License-Identifier: MIT
/* Engine life cycle: tasks, the epoll fault loop, completion and failure. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "plugin/engine/internal.h"
#include "plugin/engine/tree.h"
#include "plugin/log/log.h"

#define WAKE_TAG NULL
static char restore_tag;
#define RESTORE_TAG ((void *)&restore_tag)

struct lr_engine *lr_engine_create(struct page_source *src, const struct lr_engine_opts *o)
{
	struct lr_engine *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->src = src;
	e->o = *o;
	e->restore_fd = -1;
	if (e->o.workers > MAX_WORKERS)
		e->o.workers = MAX_WORKERS;
	if (!e->o.prefetch_step)
		e->o.prefetch_step = src->choice.step;
	if (!e->o.prefetch_step || e->o.prefetch_step % PAGE || e->o.prefetch_step > PREFETCH_CHUNK)
		e->o.prefetch_step = PREFETCH_STEP_MIN;
	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->work, NULL);
	pthread_cond_init(&e->calm, NULL);
	if (page_source_async(src) && lr_remote_create(e)) {
		free(e);
		return NULL;
	}
	e->epfd = epoll_create1(EPOLL_CLOEXEC);
	e->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = WAKE_TAG};
	if (e->epfd < 0 || e->wakefd < 0 || epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->wakefd, &ev)) {
		pr_perror("can't set up the engine's epoll");
		lr_engine_destroy(e);
		return NULL;
	}
	if (src->copies) {
		e->fault_buf = aligned_alloc(PAGE, FAULT_AROUND_MAX * PAGE);
		for (unsigned i = 0; i <= e->o.workers && e->fault_buf; i++) {
			unsigned slot = i == e->o.workers ? OWN_CLAIM : i;
			e->claims[slot].buf = aligned_alloc(PAGE, e->o.prefetch_step);
			if (!e->claims[slot].buf)
				break;
		}
		if (!e->fault_buf || !e->claims[OWN_CLAIM].buf) {
			pr_err("out of memory for the copy buffers");
			lr_engine_destroy(e);
			return NULL;
		}
	}
	if (page_source_async(src)) /* remote.c said what its requests are */
		pr_info("page source: page-server requests, answers received into buffers");
	else
		pr_info("page source: %s; background steps %llu..%llu KiB", src->copies ? "pread into buffers" : "mmap",
			(unsigned long long)(PREFETCH_STEP_MIN < e->o.prefetch_step ? PREFETCH_STEP_MIN
										    : e->o.prefetch_step) >>
			    10,
			(unsigned long long)e->o.prefetch_step >> 10);
	snprintf(e->stats.source, sizeof(e->stats.source), "%s", page_source_kind_name(src->choice.kind));
	snprintf(e->stats.source_why, sizeof(e->stats.source_why), "%s", src->choice.why);
	e->stats.workers_calm = e->o.workers_calm;
	snprintf(e->stats.workers_why, sizeof(e->stats.workers_why), "%s", e->o.workers_why ? e->o.workers_why : "");
	snprintf(e->stats.follow_why, sizeof(e->stats.follow_why), "%s", e->o.follow_why ? e->o.follow_why : "");
	e->stats.step_max = e->o.prefetch_step;
	e->stats.fault_thread_cpu = -1;
	e->stats.t_start = lr_now();
	return e;
}

void lr_engine_destroy(struct lr_engine *e)
{
	if (!e)
		return;
	lr_prefetch_stop(e);
	lr_remote_detach(e);
	for (size_t i = 0; i < e->nr_tasks; i++) {
		struct lr_task *t = e->tasks[i];
		if (t->uffd >= 0)
			close(t->uffd);
		lr_ranges_free(&t->pending);
		free(t);
	}
	lr_thp_free(e);
	lr_ws_free(e);
	free(e->tasks);
	free(e->fault_buf);
	for (unsigned i = 0; i < NR_CLAIMS; i++)
		free(e->claims[i].buf);
	if (e->epfd >= 0)
		close(e->epfd);
	if (e->wakefd >= 0)
		close(e->wakefd);
	if (e->restore_fd >= 0)
		close(e->restore_fd);
	free(e);
}

int lr_engine_add_task(struct lr_engine *e, uint32_t vpid, pid_t real_pid, int uffd, const struct img_mm *mm)
{
	char err[512];
	int ret = -1;

	pthread_mutex_lock(&e->lock);
	struct lr_task *t = lr_task_new(e, uffd, vpid, vpid, real_pid, -1, 0);
	if (!t) {
		close(uffd);
		goto out;
	}
	if (lr_ranges_build_for(&t->pending, mm, page_source_async(e->src), err, sizeof(err))) {
		pr_err("%s", err);
		lr_task_gone(e, t); /* its uffd is closed with the engine */
		goto out;
	}
	e->stats.total_pages += t->pending.pages;
	lr_thp_add_task(e, t, mm);
	lr_ws_task_added(e, t);
	pr_info("task %u (pid %d): uffd %d, %zu lazy ranges, %llu pages", vpid, real_pid, uffd, t->pending.nr,
		(unsigned long long)t->pending.pages);
	ret = 0;
out:
	pthread_mutex_unlock(&e->lock);
	return ret;
}

int lr_engine_watch_restore(struct lr_engine *e, int fd)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = RESTORE_TAG};

	if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, fd, &ev)) {
		pr_perror("can't watch the restore (fd %d)", fd);
		close(fd);
		return -1;
	}
	e->restore_fd = fd;
	return 0;
}

void lr_engine_restore_finished(struct lr_engine *e)
{
	pthread_mutex_lock(&e->lock);
	lr_stage_enter(e, STAGE_FINISHED);
	if (e->o.journal) /* every task is with the supervisor now: restartable */
		__atomic_store_n(&e->o.journal->head->finished, 1, __ATOMIC_RELEASE);
	e->stats.t_finished = lr_now();
	pthread_cond_broadcast(&e->work);
	pthread_mutex_unlock(&e->lock);
	if (e->restore_fd < 0)
		lr_engine_restore_over(e);
	lr_engine_kick(e);
}

void lr_engine_restore_over(struct lr_engine *e)
{
	if (!lr_stage_enter(e, STAGE_OVER))
		return;
	pr_debug("the restore is over: criu has let go of the tasks");
	lr_engine_kick(e);
}

/* Lock held: epoll timeout (ms) until the restore is taken as over, -1 if not waiting for it. */
static int restore_over_in(struct lr_engine *e)
{
	if (lr_stage(e) != STAGE_FINISHED)
		return -1;
	double left = e->stats.t_finished + RESTORE_OVER_MS / 1e3 - lr_now();
	return left > 0 ? (int)(left * 1e3) + 1 : 0;
}

const struct lr_stats *lr_engine_stats(const struct lr_engine *e)
{
	return &e->stats;
}

/* Lock held: restore finished and nothing left pending or in a copier's hands (taken back is not). */
static bool all_done(struct lr_engine *e)
{
	if (lr_stage(e) < STAGE_FINISHED || lr_pending_work(e) || lr_remote_busy(e))
		return false;
	for (unsigned i = 0; i < NR_CLAIMS; i++)
		if (e->claims[i].t && !e->claims[i].cancelled)
			return false;
	return true;
}

static void draw_progress(struct lr_engine *e)
{
	uint64_t left = 0;

	for (size_t i = 0; i < e->nr_tasks; i++)
		left += e->tasks[i]->pending.pages;
	uint64_t total = e->stats.total_pages, have = total > left ? total - left : 0;
	fprintf(stderr, "\rlazy-pages: %llu/%llu MiB resident, %llu faults   ", (unsigned long long)(have >> 8),
		(unsigned long long)(total >> 8), (unsigned long long)e->stats.faults);
}

/*
 * Faults first: on 2 cores the prefetch workers would otherwise keep the fault
 * thread waiting for a CPU.  Until the restore is over a real-time class
 * cannot starve anything: the thread sleeps in epoll_wait unless a fault or
 * event is pending.
 */
static bool prefer_fault_thread(void)
{
	struct sched_param sp = {.sched_priority = 1};
	int er = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);

	if (er)
		pr_debug("fault thread stays SCHED_OTHER: %s", strerror(er));
	return !er;
}

/*
 * From the restore-finished marker on, the fault thread copies its own prefetch
 * claim between faults, polling its uffds after each step as stock criu does: a
 * fault then waits for at most one step and never for a wake-up, which on
 * this VM's idle vCPUs costs tens of microseconds.  A busy thread must not be
 * real-time (it would starve the restored program), so it leaves SCHED_FIFO
 * then.
 */
static void leave_fifo(void)
{
	struct sched_param sp = {.sched_priority = 0};

	if (pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp))
		pr_debug("fault thread stays SCHED_FIFO");
}

/* What epoll_wait() returned: the restore's end, a wake-up, a remote answer, a uffd; -1 if the engine failed. */
static int dispatch(struct lr_engine *e, const struct epoll_event *evs, int n)
{
	for (int i = 0; i < n; i++) {
		struct lr_task *t = evs[i].data.ptr;
		if (t == RESTORE_TAG) {
			epoll_ctl(e->epfd, EPOLL_CTL_DEL, e->restore_fd, NULL);
			lr_engine_restore_over(e);
			continue;
		}
		if (t == WAKE_TAG) {
			uint64_t v;
			if (read(e->wakefd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				pr_perror("engine wake-up read");
			continue;
		}
		if (lr_remote_event(e, t))
			continue;
		if (lr_drain_uffd(e, t))
			return -1;
	}
	return 0;
}

/*
 * All resident: huge pages are collapsed by a thread of their own while this
 * one goes on serving faults (pages never dumped) and events, which would
 * otherwise wait for whole collapse calls.
 */
static void sweep_huge_pages(struct lr_engine *e)
{
	struct epoll_event evs[32];

	if (!lr_thp_sweep_start(e))
		return;
	while (!lr_thp_sweep_done(e)) {
		int n = epoll_wait(e->epfd, evs, 32, -1);
		if (n < 0 && errno != EINTR) {
			pr_perror("epoll_wait");
			break;
		}
		if (n > 0 && dispatch(e, evs, n))
			break; /* the tree is killed: the collapses end with ESRCH */
	}
	lr_thp_sweep_join(e);
}

int lr_engine_run(struct lr_engine *e)
{
	struct epoll_event evs[32];
	bool progress = e->o.progress && isatty(STDERR_FILENO);
	bool fifo, busy = false;
	int ret = -1;

	lr_follow_start(e); /* before the workers start: they are kept off its CPU */
	if (lr_prefetch_start(e))
		return -1;
	fifo = prefer_fault_thread();
	for (;;) {
		pthread_mutex_lock(&e->lock);
		bool stop = lr_stage(e) >= STAGE_STOPPING, done = all_done(e);
		int over_in = restore_over_in(e), calm_in = lr_prefetch_calm_in(e), hold_in = lr_ws_hold_in(e),
		    release_in = lr_ws_release_in(e);
		if (progress)
			draw_progress(e);
		pthread_mutex_unlock(&e->lock);
		if (stop)
			break;
		if (done) {
			ret = 0;
			break;
		}
		if (over_in == 0) {
			pr_info("criu still runs %d ms after the restore-finished marker: taken as over",
				RESTORE_OVER_MS);
			lr_engine_restore_over(e);
		}
		int timeout = busy ? 0 : progress ? 200 : -1;
		if (over_in > 0 && (timeout < 0 || over_in < timeout))
			timeout = over_in;
		if (calm_in > 0 && (timeout < 0 || calm_in < timeout))
			timeout = calm_in;
		if (hold_in > 0 && (timeout < 0 || hold_in < timeout))
			timeout = hold_in;
		if (release_in > 0 && (timeout < 0 || release_in < timeout))
			timeout = release_in;
		int overdue_in = lr_remote_overdue(e);
		if (overdue_in >= 0 && (timeout < 0 || overdue_in < timeout))
			timeout = overdue_in;
		int n = lr_take_ready(e, evs);
		if (!n)
			n = epoll_wait(e->epfd, evs, 32, timeout);
		if (n < 0 && errno != EINTR) {
			pr_perror("epoll_wait");
			break;
		}
		if (dispatch(e, evs, n))
			goto out;
		/* like stock criu's one thread, from the marker on (the workers only take idle time) */
		int st = lr_stage(e);
		bool over = st >= STAGE_FINISHED && st < STAGE_STOPPING;
		if (fifo && over && !e->remote) { /* remote: the fault thread only sends, it stays first */
			leave_fifo();
			fifo = false;
		}
		/* following, the fault thread sleeps between faults on the program's CPU: the workers stream */
		busy = over && (e->remote ? lr_remote_pump(e) : !e->follow.on && lr_prefetch_own_step(e));
	}
out:
	pthread_mutex_lock(&e->lock);
	if (ret == 0) {
		e->stats.t_all_resident = lr_now();
		lr_ws_close(e);
	}
	lr_ws_release(e, "the engine stops");
	lr_stage_enter(e, STAGE_STOPPING);
	pthread_cond_broadcast(&e->work);
	pthread_mutex_unlock(&e->lock);
	if (progress)
		fprintf(stderr, "\n");
	lr_prefetch_stop(e);
	lr_follow_stop(e);
	if (lr_stage(e) == STAGE_FAILED)
		ret = -1;
	if (ret == 0) { /* after "all resident" and the workers */
		sweep_huge_pages(e);
		if (lr_stage(e) == STAGE_FAILED)
			ret = -1;
	}
	return ret;
}

// SPDX-License-Identifier: MIT
/* Working-set recording and replay (ws.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "images/ws.h"
#include "plugin/engine/internal.h"
#include "plugin/engine/ws.h"
#include "plugin/log/log.h"

/* Recorded pages sorted together, so that neighbours merge into one run (one copy) across that much of the order. */
#define WS_BATCH   32U
#define WS_GAP	   2U  /* pending pages between two of a batch's taken with them: one copy, not two */
#define WS_RUN_MAX 64U /* pages a run: one background request of a network source (remote.c) */

/* A hand-off task's first faults (fault thread only). */
struct ws_rec {
	uint32_t pid; /* 0: slot unused */
	uint32_t nr, cap;
	uint64_t *pages;
};

/* A task whose working set is being installed. */
struct ws_replay {
	struct lr_task *t;
	const struct img_ws_task *list;
	uint32_t pos;		      /* next page of list into a batch */
	uint64_t taken, gap, skipped; /* recorded pages handed out, pages between them, pages not pending */
	double t0;
};

struct lr_ws {
	struct img_dir *dir;
	bool record, full_warned;
	unsigned hold_s; /* recording: no prefetch for this long after the marker */
	bool hold_over;	 /* engine lock: that window has passed (recording ended with it) */
	uint64_t ident;
	struct img_ws file; /* the working set to replay (no tasks if none) */
	struct ws_rec *rec; /* by task index; fault thread only */
	size_t nr_rec;
	uint64_t total_rec;
	struct ws_replay *q; /* engine lock */
	size_t nr_q, cap_q;
	unsigned inflight;	  /* engine lock: runs taken, not over yet */
	double t0;		  /* engine lock: the first task's hand-off (0: no working set to install) */
	uint64_t batch[WS_BATCH]; /* engine lock: q[0]'s batch, sorted; runs are taken from at on */
	uint32_t nr_batch, at;
	/* lr_ws_hold_tasks(): before the hand-off; then engine lock */
	unsigned hold_ms;
	void (*release)(void *arg); /* NULL: no task held (any more) */
	void *release_arg;
};

static void load(struct lr_ws *ws, const char *path)
{
	struct img_err err;
	int r = img_ws_read(ws->dir, &ws->file, &err);

	if (r == 1) {
		pr_info("no working set in %s (%s): pages come as they are asked for", path, IMG_WS_FILE);
		return;
	}
	if (r < 0) {
		pr_warn("%s: working set ignored", err.msg);
		return;
	}
	if (ws->file.ident != ws->ident) {
		pr_warn("%s/%s: working set recorded for another dump (identity %016llx, this dump's %016llx): ignored",
			path, IMG_WS_FILE, (unsigned long long)ws->file.ident, (unsigned long long)ws->ident);
		img_ws_free(&ws->file);
		return;
	}
	uint64_t n = 0;
	for (size_t i = 0; i < ws->file.nr_tasks; i++)
		n += ws->file.tasks[i].nr;
	pr_info("%s/%s: working set of %llu pages in %zu tasks, installed first", path, IMG_WS_FILE,
		(unsigned long long)n, ws->file.nr_tasks);
}

int lr_ws_setup(struct lr_engine *e, struct img_dir *dir, bool record, unsigned hold_s)
{
	struct lr_ws *ws = calloc(1, sizeof(*ws));
	struct img_err err;

	if (!ws) {
		pr_err("out of memory for the working set");
		return record ? -1 : 0;
	}
	ws->dir = dir;
	ws->record = record;
	ws->hold_s = record ? hold_s : 0;
	if (img_ws_ident(dir, &ws->ident, &err)) {
		pr_warn("%s: no working set replayed or recorded", err.msg);
		free(ws);
		return record ? -1 : 0;
	}
	if (!record)
		load(ws, img_dir_path(dir));
	else if (hold_s)
		pr_info("recording the working set: no prefetch for %u s after the restore-finished marker, so "
			"that every page touched first then faults; %s/%s is replaced, not replayed",
			hold_s, img_dir_path(dir), IMG_WS_FILE);
	else
		pr_info("recording the working set beside the prefetch: %s/%s is replaced, not replayed",
			img_dir_path(dir), IMG_WS_FILE);
	e->ws = ws; /* before the hand-off thread and the fault loop start */
	return 0;
}

int lr_ws_use(struct lr_engine *e, struct img_ws *file)
{
	struct lr_ws *ws = calloc(1, sizeof(*ws));

	if (!ws)
		return -1;
	ws->file = *file;
	memset(file, 0, sizeof(*file));
	e->ws = ws;
	return 0;
}

void lr_ws_task_added(struct lr_engine *e, struct lr_task *t)
{
	struct lr_ws *ws = e->ws;
	const struct img_ws_task *list = ws ? img_ws_task(&ws->file, t->vpid) : NULL;

	if (!list || !list->nr)
		return;
	if (ws->nr_q == ws->cap_q) {
		size_t cap = ws->cap_q ? ws->cap_q * 2 : 8;
		struct ws_replay *q = realloc(ws->q, cap * sizeof(*q));
		if (!q) {
			pr_warn("task %u: out of memory: its working set is not installed first", t->vpid);
			return;
		}
		ws->q = q;
		ws->cap_q = cap;
	}
	ws->q[ws->nr_q++] = (struct ws_replay){.t = t, .list = list, .t0 = lr_now()};
	if (!ws->t0)
		ws->t0 = ws->q[ws->nr_q - 1].t0;
	pthread_cond_broadcast(&e->work);
}

void lr_ws_note(struct lr_engine *e, struct lr_task *t, uint64_t img)
{
	struct lr_ws *ws = e->ws;

	if (!ws || !ws->record || ws->hold_over || !t->vpid) /* fork children have no images of their own */
		return;
	if (t->idx >= ws->nr_rec) {
		size_t n = t->idx + 1;
		struct ws_rec *r = realloc(ws->rec, n * sizeof(*r));
		if (!r)
			return;
		memset(r + ws->nr_rec, 0, (n - ws->nr_rec) * sizeof(*r));
		ws->rec = r;
		ws->nr_rec = n;
	}
	struct ws_rec *r = &ws->rec[t->idx];
	r->pid = t->vpid;
	img &= ~(PAGE - 1);
	if (r->nr && r->pages[r->nr - 1] == img) /* a fault served again (EAGAIN) */
		return;
	if (r->nr >= IMG_WS_MAX_PAGES || ws->total_rec >= IMG_WS_MAX_TOTAL) {
		if (!ws->full_warned)
			pr_info("working set: bound reached (%u pages a task, %u in all): later faults not recorded",
				IMG_WS_MAX_PAGES, IMG_WS_MAX_TOTAL);
		ws->full_warned = true;
		return;
	}
	if (r->nr == r->cap) {
		uint32_t cap = r->cap ? r->cap * 2 : 256;
		uint64_t *p = realloc(r->pages, cap * sizeof(*p));
		if (!p)
			return;
		r->pages = p;
		r->cap = cap;
	}
	r->pages[r->nr++] = img;
	ws->total_rec++;
}

int lr_ws_hold_in(struct lr_engine *e)
{
	struct lr_ws *ws = e->ws;

	if (!ws || !ws->hold_s || ws->hold_over)
		return 0;
	if (lr_stage(e) < STAGE_FINISHED)
		return -1;
	double left = e->stats.t_finished + ws->hold_s - lr_now();
	if (left > 0 && lr_stage(e) < STAGE_STOPPING)
		return (int)(left * 1e3) + 1;
	ws->hold_over = true;
	pr_info("working set: %llu pages recorded in the %u s after the restore-finished marker; the prefetch "
		"starts, later faults are not recorded",
		(unsigned long long)ws->total_rec, ws->hold_s);
	pthread_cond_broadcast(&e->work);
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Lock held: the next batch of q's list, sorted, from which runs are taken; false when the list is over. */
static bool refill(struct lr_ws *ws, struct ws_replay *q)
{
	uint32_t n = 0;

	while (n < WS_BATCH && q->pos < q->list->nr)
		ws->batch[n++] = q->list->pages[q->pos++];
	qsort(ws->batch, n, sizeof(ws->batch[0]), cmp_u64);
	ws->nr_batch = n;
	ws->at = 0;
	return n > 0;
}

bool lr_ws_replays(const struct lr_engine *e)
{
	return e->ws && !e->ws->record && e->ws->file.nr_tasks;
}

void lr_ws_hold_tasks(struct lr_engine *e, unsigned max_ms, void (*release)(void *), void *arg)
{
	struct lr_ws *ws = e->ws;

	ws->hold_ms = max_ms;
	ws->release = release;
	ws->release_arg = arg;
	pr_info("working set: criu is asked to hold the tasks after the restore finished until it is installed, "
		"%u ms at most",
		max_ms);
}

void lr_ws_release(struct lr_engine *e, const char *why)
{
	struct lr_ws *ws = e->ws;

	if (!ws || !ws->release)
		return;
	ws->release(ws->release_arg);
	ws->release = NULL;
	if (e->stats.t_finished > 0)
		pr_info("tasks released %.3f ms after the restore-finished marker: %s",
			(lr_now() - e->stats.t_finished) * 1e3, why);
	else
		pr_info("tasks released before the restore finished: %s", why);
}

int lr_ws_release_in(struct lr_engine *e)
{
	struct lr_ws *ws = e->ws;

	if (!ws || !ws->release || lr_stage(e) < STAGE_FINISHED)
		return -1;
	if (!ws->nr_q && !ws->inflight) { /* no task had a list, or the set went in before the marker */
		lr_ws_release(e, "no working set left to install");
		return -1;
	}
	double left = e->stats.t_finished + ws->hold_ms / 1e3 - lr_now();
	if (left > 0)
		return (int)(left * 1e3) + 1;
	lr_ws_release(e, "the hold's bound passed: the rest of the working set goes in while they run");
	return -1;
}

/* Lock held: once every list is handed out and every run over, the working set is in. */
static void check_installed(struct lr_engine *e, struct lr_ws *ws)
{
	if (ws->nr_q || ws->inflight || !ws->t0)
		return;
	e->stats.ws_ms = (lr_now() - ws->t0) * 1e3;
	ws->t0 = 0;
	pr_info("working set installed: %llu pages (and %llu between them) in %.3f ms (%llu not pending any more)",
		(unsigned long long)e->stats.ws_pages, (unsigned long long)e->stats.ws_gap_pages, e->stats.ws_ms,
		(unsigned long long)e->stats.ws_skipped);
	lr_ws_release(e, "working set installed");
}

/* Lock held: q's list is handed out (or its task gone): say how it went and take it off the queue. */
static void finish(struct lr_engine *e, struct lr_ws *ws)
{
	struct ws_replay *q = &ws->q[0];

	pr_info("task %u: working set handed to the copiers: %llu pages (and %llu between them) in %.3f ms (%llu "
		"not pending any more)",
		q->t->vpid, (unsigned long long)q->taken, (unsigned long long)q->gap, (lr_now() - q->t0) * 1e3,
		(unsigned long long)q->skipped);
	memmove(ws->q, ws->q + 1, (ws->nr_q - 1) * sizeof(*ws->q));
	ws->nr_q--;
	ws->nr_batch = ws->at = 0;
	check_installed(e, ws);
}

void lr_ws_run_over(struct lr_engine *e)
{
	struct lr_ws *ws = e->ws;

	if (ws && ws->inflight && !--ws->inflight)
		check_installed(e, ws);
}

/*
 * Lock held: the next run of the batch, out of t's pending ranges: a recorded
 * page and those after it in the batch within WS_GAP pending pages (a copy
 * costs more than its bytes), in one range.  A page is taken only where it
 * still sits at its dump-time address (no remap moved it) and nobody
 * installed or claimed it yet.  False when the batch has none left.
 */
static bool next_run(struct lr_ws *ws, struct ws_replay *q, struct lr_range *out)
{
	struct lr_task *t = q->t;

	while (ws->at < ws->nr_batch) {
		uint64_t p = ws->batch[ws->at++];
		if (ws->at > 1 && p == ws->batch[ws->at - 2])
			continue;
		const struct lr_range *rg = lr_ranges_get(&t->pending, p);
		if (!rg || rg->img + (p - rg->start) != p) {
			pr_debug("task %u: working-set page 0x%llx is %s", t->vpid, (unsigned long long)p,
				 !rg ? "not pending (installed, claimed or dropped)" : "moved");
			q->skipped++;
			continue;
		}
		uint64_t end = p + PAGE, own = 1;
		for (; ws->at < ws->nr_batch; ws->at++) {
			uint64_t n = ws->batch[ws->at];
			if (n == ws->batch[ws->at - 1])
				continue;
			/* the range at its dump-time address from p on holds n too, and the gap */
			if (n - end > WS_GAP * PAGE || n - p >= WS_RUN_MAX * PAGE || n >= rg->end)
				break;
			end = n + PAGE;
			own++;
		}
		q->taken += own;
		q->gap += (end - p) / PAGE - own;
		*out = (struct lr_range){.start = p, .end = end, .img = p};
		return true;
	}
	return false;
}

bool lr_ws_take(struct lr_engine *e, struct lr_task **task, struct lr_range *out)
{
	struct lr_ws *ws = e->ws;

	while (ws && ws->nr_q) {
		struct ws_replay *q = &ws->q[0];
		bool over = q->t->gone || lr_stage(e) >= STAGE_STOPPING;
		uint64_t taken = q->taken, gap = q->gap, skipped = q->skipped;
		bool got = !over && next_run(ws, q, out);
		e->stats.ws_pages += q->taken - taken;
		e->stats.ws_gap_pages += q->gap - gap;
		e->stats.ws_skipped += q->skipped - skipped;
		if (got) {
			*task = q->t;
			ws->inflight++;
			return true;
		}
		if (over || !refill(ws, q))
			finish(e, ws);
	}
	return false;
}

void lr_ws_close(struct lr_engine *e)
{
	struct lr_task *t;
	struct lr_range r;

	/* nothing is pending: next_run() counts the rest as installed by others (a run can't come) */
	while (lr_ws_take(e, &t, &r))
		lr_ws_run_over(e);
}

/* The first occurrence of each page, in order (a page dropped and faulted again counts once). */
static uint32_t dedupe(uint64_t *pages, uint32_t nr)
{
	uint64_t *sorted = malloc((nr ? nr : 1) * sizeof(*sorted));
	uint8_t *seen = calloc(nr ? nr : 1, 1);
	uint32_t out = 0;

	if (!sorted || !seen) {
		free(sorted);
		free(seen);
		return nr;
	}
	memcpy(sorted, pages, nr * sizeof(*sorted));
	qsort(sorted, nr, sizeof(*sorted), cmp_u64);
	for (uint32_t i = 0; i < nr; i++) {
		uint64_t *hit = bsearch(&pages[i], sorted, nr, sizeof(*sorted), cmp_u64);
		/* the first equal element stands for the value */
		while (hit > sorted && hit[-1] == pages[i])
			hit--;
		if (seen[hit - sorted])
			continue;
		seen[hit - sorted] = 1;
		pages[out++] = pages[i];
	}
	free(sorted);
	free(seen);
	return out;
}

static int cmp_task(const void *a, const void *b)
{
	const struct img_ws_task *x = a, *y = b;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

int lr_ws_save(struct lr_engine *e)
{
	struct lr_ws *ws = e->ws;
	struct img_ws out = {0};
	struct img_err err;
	uint64_t total = 0;

	if (!ws || !ws->record)
		return 0;
	out.ident = ws->ident;
	out.tasks = calloc(ws->nr_rec ? ws->nr_rec : 1, sizeof(*out.tasks));
	if (!out.tasks) {
		pr_warn("out of memory: working set not written");
		return -1;
	}
	for (size_t i = 0; i < ws->nr_rec; i++) {
		struct ws_rec *r = &ws->rec[i];
		if (!r->pid)
			continue;
		r->nr = dedupe(r->pages, r->nr);
		out.tasks[out.nr_tasks++] = (struct img_ws_task){r->pid, r->nr, r->pages};
		total += r->nr;
	}
	qsort(out.tasks, out.nr_tasks, sizeof(*out.tasks), cmp_task);
	int ret = img_ws_write(ws->dir, &out, &err);
	if (ret)
		pr_warn("%s: working set not written", err.msg);
	else
		pr_info("working set: %llu pages of %zu tasks written to %s/%s", (unsigned long long)total,
			out.nr_tasks, img_dir_path(ws->dir), IMG_WS_FILE);
	e->stats.ws_recorded = total;
	free(out.tasks); /* the pages are the records' */
	return ret;
}

void lr_ws_free(struct lr_engine *e)
{
	struct lr_ws *ws = e->ws;

	if (!ws)
		return;
	for (size_t i = 0; i < ws->nr_rec; i++)
		free(ws->rec[i].pages);
	free(ws->rec);
	free(ws->q);
	img_ws_free(&ws->file);
	free(ws);
	e->ws = NULL;
}

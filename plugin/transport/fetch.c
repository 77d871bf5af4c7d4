// SPDX-License-Identifier: MIT
/*
 * `lazyrestore page-fetch`: fetch every present page of a dump through the
 * page-server client (client.c) and check each against the local copy of
 * the dump.  A test and measuring tool for the transport until the engine
 * uses the client as a page source: many GETs in flight, every Nth an
 * urgent one (its latency measured), optional pacing so a test can break
 * the connection half-way.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "images/image.h"
#include "plugin/cli/commands.h"
#include "plugin/transport/client.h"

static const char usage_text[] =
    "usage: lazyrestore page-fetch -D DIR --address HOST --port PORT [OPTIONS]\n"
    "\n"
    "Fetch every present page of every live task of the dump in DIR from the\n"
    "page server at HOST:PORT (CRIU's protocol) and compare each with DIR's\n"
    "pages files.  Prints the pages, bytes, time and rate, and the latency of\n"
    "the urgent requests.  Exit 0 if every page came and matched, 1 if not\n"
    "(the first error is printed), 2 on bad usage.\n"
    "\n"
    "options:\n"
    "  -D, --images-dir DIR   the dump (its local copy: what to ask, what to expect)\n"
    "      --address HOST     the page server (default 127.0.0.1)\n"
    "      --port PORT\n"
    "      --chunk PAGES      pages per GET (default 256)\n"
    "      --urgent-every N   every Nth GET is urgent (default 0: none)\n"
    "      --faults N         meanwhile, N one-page urgent GETs of random pages, one\n"
    "                         at a time like a faulting thread (latency p50/p99)\n"
    "      --urgent-channel   a second connection for urgent GETs (our page server)\n"
    "      --reconnect        survive a lost connection (our page server)\n"
    "      --window PAGES     background pages in flight (default 4096)\n"
    "      --stall-ms MS      no byte for this long with answers due: reconnect (default 10000)\n"
    "      --retry-ms MS      give up reconnecting after this long (default 30000)\n"
    "      --lazy-dump        DIR is a `criu dump --lazy-pages` dump: fetch its lazy\n"
    "                         entries (not in its pages files, so not compared)\n"
    "      --pace-ms MS       submit in 16 steps, MS apart (tests break the link meanwhile)\n"
    "      --wire 4.1|4.2     header format (default 4.1: 24 bytes)\n"
    "      --tls, --tls-cacert FILE, --tls-cacrl FILE, --tls-cert FILE, --tls-key FILE,\n"
    "      --tls-no-cn-verify as criu's\n"
    "  -h, --help\n";

struct fetch {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t outstanding, failed;
	char first_err[1024];
	uint64_t *lat_us;
	size_t nr_lat, cap_lat;
};

struct chunk {
	struct fetch *f;
	struct timespec t0;
	bool urgent;
};

static uint64_t us_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)(t.tv_sec - t0->tv_sec) * 1000000 + (uint64_t)((t.tv_nsec - t0->tv_nsec) / 1000);
}

static void done(void *arg, int status, uint32_t pid, uint64_t vaddr, uint32_t nr_pages, const char *err)
{
	struct chunk *ch = arg;
	struct fetch *f = ch->f;
	uint64_t us = us_since(&ch->t0);

	(void)pid;
	(void)vaddr;
	(void)nr_pages;
	pthread_mutex_lock(&f->lock);
	if (status) {
		if (!f->failed++)
			snprintf(f->first_err, sizeof(f->first_err), "%s", err);
	} else if (ch->urgent && f->nr_lat < f->cap_lat) {
		f->lat_us[f->nr_lat++] = us;
	}
	f->outstanding--;
	pthread_cond_signal(&f->cond);
	pthread_mutex_unlock(&f->lock);
	free(ch);
}

struct task {
	uint32_t pid;
	struct img_mm mm;
	struct img_pages pages;
	uint8_t *buf; /* the fetched pages, at the pages file's offsets */
	uint64_t lazy_pages;
	uint8_t *lazy_buf; /* --lazy-dump: the lazy entries' pages, one after the other */
};

/* A faulting thread: one-page urgent GETs of random present pages, one at a time. */
struct faulter {
	struct psc *c;
	struct task *tasks;
	size_t nr;
	long n;
	_Atomic bool stop;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int status; /* of the GET in flight: 1 while waiting */
	uint64_t *lat_us;
	size_t nr_lat;
	uint64_t bad;
	char err[1024];
};

static void fault_done(void *arg, int status, uint32_t pid, uint64_t vaddr, uint32_t nr_pages, const char *err)
{
	struct faulter *fa = arg;

	(void)pid;
	(void)vaddr;
	(void)nr_pages;
	pthread_mutex_lock(&fa->lock);
	fa->status = status;
	if (status)
		snprintf(fa->err, sizeof(fa->err), "%s", err);
	pthread_cond_signal(&fa->cond);
	pthread_mutex_unlock(&fa->lock);
}

static void *faulter(void *arg)
{
	struct faulter *fa = arg;
	unsigned seed = 1;
	uint8_t *page = malloc(IMG_PAGE_SIZE);

	for (long i = 0; page && i < fa->n && !fa->stop; i++) {
		struct task *t = &fa->tasks[(size_t)rand_r(&seed) % fa->nr];
		const struct img_pme *p;
		struct timespec t0;
		uint64_t pg;
		char err[600];

		if (!t->mm.nr_pmes)
			continue;
		p = &t->mm.pmes[(size_t)rand_r(&seed) % t->mm.nr_pmes];
		if (!(p->flags & IMG_PE_PRESENT))
			continue;
		pg = (uint64_t)rand_r(&seed) % p->nr_pages;
		fa->status = 1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		if (psc_submit(fa->c, t->pid, p->vaddr + pg * IMG_PAGE_SIZE, 1, page, PSC_URGENT, fault_done, fa, err,
			       sizeof(err))) {
			snprintf(fa->err, sizeof(fa->err), "%s", err);
			fa->bad++;
			break;
		}
		pthread_mutex_lock(&fa->lock);
		while (fa->status == 1)
			pthread_cond_wait(&fa->cond, &fa->lock);
		pthread_mutex_unlock(&fa->lock);
		if (fa->status) {
			fa->bad++;
			break;
		}
		fa->lat_us[fa->nr_lat++] = us_since(&t0);
		if (memcmp(page, t->pages.base + p->file_off + pg * IMG_PAGE_SIZE, IMG_PAGE_SIZE)) {
			snprintf(fa->err, sizeof(fa->err), "pid %u page %#llx: urgent answer differs from the image",
				 t->pid, (unsigned long long)(p->vaddr + pg * IMG_PAGE_SIZE));
			fa->bad++;
		}
		usleep(1000);
	}
	free(page);
	return NULL;
}

static int load(const char *dir, struct img_dir **d, struct task **out, size_t *nr)
{
	struct img_task *tasks = NULL;
	struct img_err err;
	size_t n = 0;

	*nr = 0;
	if (img_dir_open(dir, d, &err) || img_read_pstree(*d, &tasks, &n, &err)) {
		fprintf(stderr, "lazyrestore page-fetch: %s\n", err.msg);
		return -1;
	}
	*out = calloc(n ? n : 1, sizeof(**out));
	if (!*out)
		goto fail;
	for (size_t i = 0; i < n; i++) {
		struct task *t = &(*out)[*nr];

		if (tasks[i].state == IMG_TASK_DEAD)
			continue;
		t->pid = tasks[i].pid;
		t->pages.fd = -1;
		if (img_read_mm(*d, t->pid, &t->mm, &err)) {
			fprintf(stderr, "lazyrestore page-fetch: %s\n", err.msg);
			goto fail;
		}
		(*nr)++;
		if (t->mm.pages_bytes && img_pages_map(*d, t->mm.pages_id, &t->pages, &err)) {
			fprintf(stderr, "lazyrestore page-fetch: %s\n", err.msg);
			goto fail;
		}
		t->buf = malloc(t->mm.pages_bytes ? t->mm.pages_bytes : 1);
		for (size_t e = 0; e < t->mm.nr_pmes; e++)
			if (t->mm.pmes[e].flags & IMG_PE_LAZY)
				t->lazy_pages += t->mm.pmes[e].nr_pages;
		t->lazy_buf = malloc(t->lazy_pages ? t->lazy_pages * IMG_PAGE_SIZE : 1);
		if (!t->buf || !t->lazy_buf)
			goto fail;
		/* touched before the clock starts: an engine receives into staging buffers it reuses */
		memset(t->buf, 0, t->mm.pages_bytes ? t->mm.pages_bytes : 1);
		memset(t->lazy_buf, 0, t->lazy_pages ? t->lazy_pages * IMG_PAGE_SIZE : 1);
	}
	img_tasks_free(tasks, n);
	return 0;
fail:
	img_tasks_free(tasks, n);
	return -1;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

enum {
	OPT_ADDRESS = 256,
	OPT_PORT,
	OPT_CHUNK,
	OPT_URGENT_EVERY,
	OPT_URGENT_CHANNEL,
	OPT_RECONNECT,
	OPT_WINDOW,
	OPT_STALL,
	OPT_RETRY,
	OPT_PACE,
	OPT_WIRE,
	OPT_FAULTS,
	OPT_LAZY,
	OPT_TLS,
};

static int num(const char *opt, const char *v, long max, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(v, &end, 10);
	if (errno || end == v || *end || *out < 0 || *out > max) {
		fprintf(stderr, "lazyrestore page-fetch: %s: bad value '%s' (0..%ld)\n", opt, v, max);
		return -1;
	}
	return 0;
}

/* Submit every present entry of every task in chunks; step/steps of them when paced. */
static int submit_all(struct psc *c, struct fetch *f, struct task *tasks, size_t nr, long chunk, long every,
		      long pace_ms, bool lazy)
{
	uint64_t total = 0, sent = 0, n = 0;
	char err[600];

	for (size_t i = 0; i < nr; i++)
		total += lazy ? tasks[i].lazy_pages : tasks[i].mm.pages_bytes / IMG_PAGE_SIZE;
	for (size_t i = 0; i < nr; i++) {
		struct task *t = &tasks[i];
		uint64_t lazy_off = 0;

		for (size_t e = 0; e < t->mm.nr_pmes; e++) {
			const struct img_pme *p = &t->mm.pmes[e];
			uint8_t *base = t->buf + p->file_off;

			if (lazy && (p->flags & IMG_PE_LAZY)) {
				base = t->lazy_buf + lazy_off;
				lazy_off += (uint64_t)p->nr_pages * IMG_PAGE_SIZE;
			} else if (lazy || !(p->flags & IMG_PE_PRESENT)) {
				continue;
			}
			for (uint32_t k = 0; k < p->nr_pages; k += (uint32_t)chunk) {
				uint32_t np = p->nr_pages - k < chunk ? p->nr_pages - k : (uint32_t)chunk;
				struct chunk *ch = malloc(sizeof(*ch));
				uint64_t steps_before = pace_ms ? sent * 16 / (total ? total : 1) : 0;

				if (!ch)
					return -1;
				ch->f = f;
				ch->urgent = every && ++n % every == 0;
				clock_gettime(CLOCK_MONOTONIC, &ch->t0);
				pthread_mutex_lock(&f->lock);
				f->outstanding++;
				pthread_mutex_unlock(&f->lock);
				if (psc_submit(c, t->pid, p->vaddr + (uint64_t)k * IMG_PAGE_SIZE, np,
					       base + (uint64_t)k * IMG_PAGE_SIZE,
					       ch->urgent ? PSC_URGENT : PSC_BACKGROUND, done, ch, err, sizeof(err))) {
					fprintf(stderr, "lazyrestore page-fetch: %s\n", err);
					free(ch);
					pthread_mutex_lock(&f->lock);
					f->outstanding--;
					pthread_mutex_unlock(&f->lock);
					return -1;
				}
				sent += np;
				if (pace_ms && sent * 16 / (total ? total : 1) != steps_before)
					usleep((useconds_t)pace_ms * 1000);
			}
		}
	}
	return 0;
}

int cmd_page_fetch(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"images-dir", required_argument, NULL, 'D'},
	    {"address", required_argument, NULL, OPT_ADDRESS},
	    {"port", required_argument, NULL, OPT_PORT},
	    {"chunk", required_argument, NULL, OPT_CHUNK},
	    {"urgent-every", required_argument, NULL, OPT_URGENT_EVERY},
	    {"urgent-channel", no_argument, NULL, OPT_URGENT_CHANNEL},
	    {"reconnect", no_argument, NULL, OPT_RECONNECT},
	    {"window", required_argument, NULL, OPT_WINDOW},
	    {"stall-ms", required_argument, NULL, OPT_STALL},
	    {"retry-ms", required_argument, NULL, OPT_RETRY},
	    {"pace-ms", required_argument, NULL, OPT_PACE},
	    {"wire", required_argument, NULL, OPT_WIRE},
	    {"faults", required_argument, NULL, OPT_FAULTS},
	    {"lazy-dump", no_argument, NULL, OPT_LAZY},
	    LR_TLS_LONGOPTS(OPT_TLS),
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct lr_tls_opts tls = {0};
	struct psc_opts po = {.host = "127.0.0.1", .port = -1, .tls = &tls};
	const char *dir = ".";
	long v, chunk = 256, every = 0, pace = 0;
	bool lazy = false;
	struct fetch f = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
	struct faulter fa = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
	pthread_t fault_thread;
	struct img_dir *d = NULL;
	struct task *tasks = NULL;
	size_t nr = 0;
	struct timespec t0;
	struct psc *c;
	char err[600];
	int o, ret = 1;

	while ((o = getopt_long(argc, argv, "D:h", opts, NULL)) != -1) {
		if (o >= OPT_TLS && o < OPT_TLS + LR_TLS_NR_OPTS) {
			lr_tls_opt(&tls, o - OPT_TLS, optarg);
			continue;
		}
		switch (o) {
		case 'D':
			dir = optarg;
			break;
		case OPT_ADDRESS:
			po.host = optarg;
			break;
		case OPT_PORT:
			if (num("--port", optarg, 65535, &v))
				return 2;
			po.port = (int)v;
			break;
		case OPT_CHUNK:
			if (num("--chunk", optarg, 1 << 20, &chunk) || !chunk)
				return 2;
			break;
		case OPT_URGENT_EVERY:
			if (num("--urgent-every", optarg, INT_MAX, &every))
				return 2;
			break;
		case OPT_URGENT_CHANNEL:
			po.urgent_channel = true;
			break;
		case OPT_RECONNECT:
			po.reconnect = true;
			break;
		case OPT_WINDOW:
			if (num("--window", optarg, 1 << 24, &v))
				return 2;
			po.window_pages = (unsigned)v;
			break;
		case OPT_STALL:
			if (num("--stall-ms", optarg, INT_MAX, &v))
				return 2;
			po.stall_ms = (unsigned)v;
			break;
		case OPT_RETRY:
			if (num("--retry-ms", optarg, INT_MAX, &v))
				return 2;
			po.retry_ms = (unsigned)v;
			break;
		case OPT_FAULTS:
			if (num("--faults", optarg, 1 << 20, &v))
				return 2;
			fa.n = v;
			break;
		case OPT_LAZY:
			lazy = true;
			break;
		case OPT_PACE:
			if (num("--pace-ms", optarg, 10000, &pace))
				return 2;
			break;
		case OPT_WIRE:
			if (ps_wire_parse(optarg, &po.wire)) {
				fprintf(stderr, "lazyrestore page-fetch: --wire: '%s' is not 4.1 or 4.2\n", optarg);
				return 2;
			}
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		default:
			fputs("Try 'lazyrestore page-fetch --help'.\n", stderr);
			return 2;
		}
	}
	if (optind < argc || po.port < 0) {
		fprintf(stderr, "lazyrestore page-fetch: %s\n",
			po.port < 0 ? "--port is required" : "unexpected argument");
		return 2;
	}
	if (load(dir, &d, &tasks, &nr))
		goto out;
	f.cap_lat = 1 << 20;
	f.lat_us = calloc(f.cap_lat, sizeof(*f.lat_us));
	if (!f.lat_us)
		goto out;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	c = psc_open(&po, err, sizeof(err));
	if (!c) {
		fprintf(stderr, "lazyrestore page-fetch: %s\n", err);
		goto out;
	}
	fa.c = c;
	fa.tasks = tasks;
	fa.nr = nr;
	fa.lat_us = calloc(fa.n ? (size_t)fa.n : 1, sizeof(*fa.lat_us));
	if (lazy)
		fa.n = 0; /* nothing local to check a fault's page against */
	if (!fa.lat_us || (fa.n && nr && pthread_create(&fault_thread, NULL, faulter, &fa))) {
		fa.n = 0;
		fa.bad++;
		snprintf(fa.err, sizeof(fa.err), "cannot start the faulting thread");
	}
	int sub = submit_all(c, &f, tasks, nr, chunk, every, pace, lazy);

	pthread_mutex_lock(&f.lock);
	while (f.outstanding)
		pthread_cond_wait(&f.cond, &f.lock);
	pthread_mutex_unlock(&f.lock);
	double secs = (double)us_since(&t0) / 1e6;

	fa.stop = true;
	if (fa.n && nr)
		pthread_join(fault_thread, NULL);
	struct psc_stats st;

	psc_get_stats(c, &st);
	int closed = psc_close(c);

	qsort(fa.lat_us, fa.nr_lat, sizeof(*fa.lat_us), cmp_u64);
	if (fa.n)
		printf("page-fetch: %zu faults during the stream: p50 %llu us p99 %llu us%s\n", fa.nr_lat,
		       (unsigned long long)(fa.nr_lat ? fa.lat_us[fa.nr_lat / 2] : 0),
		       (unsigned long long)(fa.nr_lat ? fa.lat_us[fa.nr_lat * 99 / 100] : 0), fa.bad ? "; FAILED" : "");
	if (fa.bad) {
		fprintf(stderr, "lazyrestore page-fetch: fault: %s\n", fa.err);
		goto out;
	}
	if (sub || f.failed) {
		fprintf(stderr, "lazyrestore page-fetch: %llu requests failed; first: %s\n",
			(unsigned long long)f.failed, f.first_err);
		goto out;
	}
	uint64_t bad = 0;

	for (size_t i = 0; i < nr && !lazy; i++)
		if (tasks[i].mm.pages_bytes && memcmp(tasks[i].buf, tasks[i].pages.base, tasks[i].mm.pages_bytes)) {
			fprintf(stderr, "lazyrestore page-fetch: pid %u: fetched pages differ from pages-%u.img\n",
				tasks[i].pid, tasks[i].mm.pages_id);
			bad++;
		}
	qsort(f.lat_us, f.nr_lat, sizeof(*f.lat_us), cmp_u64);
	printf("page-fetch: %llu pages (%.1f MiB) in %.3f s: %.1f MB/s; %llu requests, %llu short answers, "
	       "%llu reconnects; urgent %zu p50 %llu us p99 %llu us; %s\n",
	       (unsigned long long)st.pages, (double)st.bytes / (1 << 20), secs, (double)st.bytes / 1e6 / secs,
	       (unsigned long long)st.requests, (unsigned long long)st.short_answers, (unsigned long long)st.reconnects,
	       f.nr_lat, (unsigned long long)(f.nr_lat ? f.lat_us[f.nr_lat / 2] : 0),
	       (unsigned long long)(f.nr_lat ? f.lat_us[f.nr_lat * 99 / 100] : 0),
	       lazy  ? "lazy pages, not compared"
	       : bad ? "MISMATCH"
		     : "verified");
	if (closed)
		fprintf(stderr, "lazyrestore page-fetch: the server did not confirm PS_IOV_CLOSE\n");
	ret = bad ? 1 : 0;
out:
	for (size_t i = 0; i < nr; i++) {
		free(tasks[i].buf);
		free(tasks[i].lazy_buf);
		img_pages_unmap(&tasks[i].pages);
		img_mm_free(&tasks[i].mm);
	}
	free(tasks);
	free(f.lat_us);
	free(fa.lat_us);
	if (d)
		img_dir_close(d);
	return ret;
}

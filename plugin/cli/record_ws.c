// SPDX-License-Identifier: MIT
/*
 * lazyrestore record-ws: the working set of a running program, in the order
 * its pages are touched, written in the format a --record-ws restore writes
 * (images/ws.h).  The program's private anonymous memory is paged out to swap
 * (process_madvise MADV_PAGEOUT) and PAGEMAP_SCAN watches which pages become
 * present again: a read or a write of a swapped-out page swaps it in.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "images/image.h"
#include "images/ws.h"
#include "lib/pagemap-compat.h"
#include "plugin/cli/commands.h"

#define PAGE		 ((uint64_t)4096)
#define MAX_WATCH_PAGES	 ((uint64_t)1 << 28) /* 1 TiB of address space: a bit each */
#define NR_REGIONS	 512
#define IOV_BATCH	 512
#define DEFAULT_INTERVAL 2 /* ms between two scans */

static const char record_usage[] = "usage: lazyrestore record-ws --pid PID --for SECONDS [--images-dir DIR] [-o FILE]\n"
				   "                             [--interval MS]\n"
				   "       lazyrestore record-ws --from FILE --images-dir DIR\n"
				   "\n"
				   "Record the working set of the running program PID: which of its private\n"
				   "anonymous pages it touches (reads or writes) during the next SECONDS, in the\n"
				   "order it touches them, and write it as the working-set file that a lazy\n"
				   "restore replays first (what 'lazyrestore lazy-pages --record-ws' records).\n"
				   "\n"
				   "How: the pages are paged out to swap with process_madvise(MADV_PAGEOUT) and\n"
				   "PAGEMAP_SCAN reports every --interval which of them are present again; a\n"
				   "touch swaps a page in.  Needs active swap with room for the program's\n"
				   "resident anonymous memory (zswap, or swap on zram, makes the swap-ins cheap),\n"
				   "Linux 6.7 (PAGEMAP_SCAN), CAP_SYS_NICE and ptrace access to PID.  Pages\n"
				   "touched within one interval are ordered by address.  The program runs on\n"
				   "throughout and never sees other bytes: each first touch of a page costs it a\n"
				   "swap-in, and huge pages come back as 4 KiB pages.  At the end the pages not\n"
				   "touched are read back from swap (MADV_WILLNEED).  If the recorder dies, the\n"
				   "program keeps all its memory (what is in swap comes back on touch); keep the\n"
				   "swap on until then.  Only PID's own memory is watched (its threads share it;\n"
				   "child processes are not recorded).\n"
				   "\n"
				   "A working-set file names the dump it belongs to (a hash of its inventory.img\n"
				   "and pstree.img); a restore ignores, with a warning, a file of another dump.\n"
				   "So the recording is keyed to a dump:\n"
				   "  --images-dir DIR   DIR holds a dump of PID taken before the window (criu\n"
				   "                     dump --leave-running): the file is DIR/" IMG_WS_FILE ".\n"
				   "  -o FILE            write the recording to FILE, keyed to no dump yet (no\n"
				   "                     restore takes it as it is): dump the program after the\n"
				   "                     window, then key it with --from.\n"
				   "  --from FILE --images-dir DIR\n"
				   "                     key a recording made with -o to the dump in DIR: DIR\n"
				   "                     must hold the recorded task (same pid as seen in its pid\n"
				   "                     namespace), pages outside its private anonymous VMAs\n"
				   "                     are dropped; writes DIR/" IMG_WS_FILE ".\n"
				   "\n"
				   "options:\n"
				   "  -p, --pid PID          the program to record\n"
				   "  -t, --for SECONDS      length of the window (decimals allowed); SIGINT or\n"
				   "                         SIGTERM end it early, and the file is written\n"
				   "  -D, --images-dir DIR   the dump the file belongs to (see above)\n"
				   "  -o, --output FILE      the file to write (see above)\n"
				   "  -f, --from FILE        a recording to key to the dump in DIR\n"
				   "  -i, --interval MS      time between two scans (default 2)\n"
				   "  -h, --help             this text\n"
				   "\n"
				   "Exit status 0 when the file is written; 1 with one line naming the pid or the\n"
				   "file and the problem otherwise (no such process, no swap, a kernel without\n"
				   "MADV_PAGEOUT or PAGEMAP_SCAN, a dump without the task, ...); 2 on bad usage.\n";

struct watch_vma {
	uint64_t start, end;
	uint64_t *todo; /* a bit per page: not seen yet */
};

struct recorder {
	pid_t pid;
	uint32_t ns_pid; /* the pid as the dump names it: the innermost NSpid */
	int pidfd, pagemap;
	struct watch_vma *v;
	size_t nr_v;
	uint64_t *order; /* pages in first-touch order */
	uint32_t nr_order, cap_order;
	uint64_t paged_out, early, kept, scans, full;
	double scan_ms;
	struct page_region regions[NR_REGIONS];
};

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((format(printf, 1, 2))) static int fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "lazyrestore record-ws: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return -1;
}

/* Free swap in bytes from /proc/swaps; -1 if it cannot be read. */
static int64_t swap_free(int *nr_devices)
{
	char line[512];
	int64_t free_kib = 0;
	FILE *f = fopen("/proc/swaps", "re");

	*nr_devices = 0;
	if (!f)
		return -1;
	if (!fgets(line, sizeof(line), f)) { /* the header */
		fclose(f);
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		long long size, used;
		if (sscanf(line, "%*s %*s %lld %lld", &size, &used) == 2 && size > used) {
			free_kib += size - used;
			(*nr_devices)++;
		}
	}
	fclose(f);
	return free_kib * 1024;
}

/* The innermost NSpid of PID (its pid in the dump's pstree); 0 if unknown. */
static uint32_t ns_pid_of(pid_t pid)
{
	char path[64], line[512];
	uint32_t last = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "NSpid:", 6))
			continue;
		for (char *p = line + 6, *end; *p; p = end) {
			unsigned long v = strtoul(p, &end, 10);
			if (end == p)
				break;
			last = (uint32_t)v;
		}
	}
	fclose(f);
	return last;
}

/* A maps line that CRIU dumps as private anonymous memory (lazy on restore). */
static bool private_anon(const char *perms, const char *path)
{
	if (perms[3] != 'p' || (perms[0] != 'r' && perms[1] != 'w'))
		return false;
	return !*path || !strcmp(path, "[heap]") || !strcmp(path, "[stack]") || !strncmp(path, "[anon:", 6);
}

static int read_vmas(struct recorder *r)
{
	char path[64], line[4096];
	uint64_t total = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", r->pid);
	f = fopen(path, "re");
	if (!f)
		return fail("pid %d: cannot read %s: %s", r->pid, path, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		unsigned long long s, e;
		char perms[8], name[4096] = "";
		if (sscanf(line, "%llx-%llx %7s %*s %*s %*s %4095[^\n]", &s, &e, perms, name) < 3 || e <= s)
			continue;
		if (!private_anon(perms, name))
			continue;
		uint64_t pages = (e - s) / PAGE;
		if (total + pages > MAX_WATCH_PAGES) {
			fprintf(stderr,
				"lazyrestore record-ws: pid %d: %llx-%llx not watched (over %" PRIu64
				" GiB of address space)\n",
				r->pid, s, e, MAX_WATCH_PAGES * PAGE >> 30);
			continue;
		}
		struct watch_vma *v = realloc(r->v, (r->nr_v + 1) * sizeof(*v));
		if (!v)
			goto oom;
		r->v = v;
		v[r->nr_v] = (struct watch_vma){.start = s, .end = e, .todo = calloc((pages + 63) / 64, 8)};
		if (!v[r->nr_v].todo)
			goto oom;
		r->nr_v++;
		total += pages;
	}
	fclose(f);
	if (!r->nr_v)
		return fail("pid %d: no private anonymous memory to watch", r->pid);
	return 0;
oom:
	fclose(f);
	return fail("pid %d: out of memory for the watch list", r->pid);
}

/*
 * PAGEMAP_SCAN over [s, e) for pages in any of the categories `any`;
 * calls fn for each region.  -1 with errno on failure.
 */
static int scan(struct recorder *r, uint64_t s, uint64_t e, uint64_t any,
		void (*fn)(struct recorder *, struct watch_vma *, const struct page_region *), struct watch_vma *v)
{
	while (s < e) {
		struct pm_scan_arg a = {
		    .size = sizeof(a),
		    .start = s,
		    .end = e,
		    .vec = (uint64_t)(uintptr_t)r->regions,
		    .vec_len = NR_REGIONS,
		    .category_anyof_mask = any,
		    .return_mask = any,
		};
		long n = ioctl(r->pagemap, PAGEMAP_SCAN, &a);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		for (long i = 0; i < n; i++)
			fn(r, v, &r->regions[i]);
		if (a.walk_end <= s) { /* no progress: never loop */
			errno = EIO;
			return -1;
		}
		s = a.walk_end;
	}
	return 0;
}

static bool test_clear(struct watch_vma *v, uint64_t addr)
{
	uint64_t i = (addr - v->start) / PAGE, bit = 1ULL << (i % 64);
	bool set = v->todo[i / 64] & bit;

	v->todo[i / 64] &= ~bit;
	return set;
}

static void note_page(struct recorder *r, uint64_t addr);

/*
 * After the page-out.  A page present again is one the program touched since
 * (recorded first), unless the page-out could not take it: one shared with
 * another process (pagemap's exclusive bit clear) is not watched.  (A locked
 * VMA's pages count as touched: such a VMA is not lazy, keying drops them.)
 */
static void classify(struct recorder *r, struct watch_vma *v, const struct page_region *pr)
{
	uint64_t pm[512];

	if (!(pr->categories & PAGE_IS_PRESENT)) {
		r->paged_out += (pr->end - pr->start) / PAGE;
		return;
	}
	for (uint64_t a = pr->start; a < pr->end; a += PAGE * 512) {
		uint64_t n = (pr->end - a) / PAGE < 512 ? (pr->end - a) / PAGE : 512;
		ssize_t got = pread(r->pagemap, pm, n * 8, (off_t)(a / PAGE * 8));
		for (uint64_t i = 0; i < n; i++) {
			bool exclusive = got >= (ssize_t)((i + 1) * 8) && pm[i] >> 56 & 1;
			if (!test_clear(v, a + i * PAGE))
				continue;
			if (exclusive) {
				r->early++;
				note_page(r, a + i * PAGE);
			} else {
				r->kept++;
			}
		}
	}
}

static void note_page(struct recorder *r, uint64_t a)
{
	if (r->nr_order >= IMG_WS_MAX_PAGES) {
		r->full++;
		return;
	}
	if (r->nr_order == r->cap_order) {
		uint32_t cap = r->cap_order ? r->cap_order * 2 : 1024;
		uint64_t *o = realloc(r->order, cap * sizeof(*o));
		if (!o) {
			r->full++;
			return;
		}
		r->order = o;
		r->cap_order = cap;
	}
	r->order[r->nr_order++] = a;
}

static void note(struct recorder *r, struct watch_vma *v, const struct page_region *pr)
{
	for (uint64_t a = pr->start; a < pr->end; a += PAGE)
		if (test_clear(v, a))
			note_page(r, a);
}

/* process_madvise(advice) over every watched VMA. */
static int advise(struct recorder *r, int advice, const char *what)
{
	struct iovec iov[IOV_BATCH];
	size_t n = 0;

	for (size_t i = 0; i <= r->nr_v; i++) {
		if (i < r->nr_v)
			iov[n++] = (struct iovec){(void *)(uintptr_t)r->v[i].start, r->v[i].end - r->v[i].start};
		if (n && (n == IOV_BATCH || i == r->nr_v)) {
			/* a VMA unmapped meanwhile gives ENOMEM for its range; the rest is done */
			if (syscall(SYS_process_madvise, r->pidfd, iov, n, advice, 0) < 0 && errno != ENOMEM) {
				if (errno == EINVAL)
					return fail(
					    "pid %d: process_madvise(%s) not supported by this kernel (Linux 5.10+)",
					    r->pid, what);
				if (errno == EPERM)
					return fail("pid %d: process_madvise(%s): not permitted (needs CAP_SYS_NICE)",
						    r->pid, what);
				if (errno == ESRCH)
					return fail("pid %d: the program exited", r->pid);
				return fail("pid %d: process_madvise(%s): %s", r->pid, what, strerror(errno));
			}
			n = 0;
		}
	}
	return 0;
}

static int scan_all(struct recorder *r, uint64_t any,
		    void (*fn)(struct recorder *, struct watch_vma *, const struct page_region *))
{
	for (size_t i = 0; i < r->nr_v; i++)
		if (scan(r, r->v[i].start, r->v[i].end, any, fn, &r->v[i])) {
			if (errno == ENOTTY || errno == EINVAL)
				return fail("pid %d: PAGEMAP_SCAN not supported by this kernel (Linux 6.7+)", r->pid);
			if (errno == ESRCH || kill(r->pid, 0))
				return fail("pid %d: the program exited", r->pid);
			return fail("pid %d: PAGEMAP_SCAN of /proc/%d/pagemap: %s", r->pid, r->pid, strerror(errno));
		}
	return 0;
}

static void count_present(struct recorder *r, struct watch_vma *v, const struct page_region *pr)
{
	(void)v;
	r->kept += (pr->end - pr->start) / PAGE;
}

static int setup(struct recorder *r)
{
	char path[64];
	int nr_swap;

	r->pidfd = (int)syscall(SYS_pidfd_open, r->pid, 0);
	if (r->pidfd < 0)
		return fail("pid %d: %s", r->pid, errno == ESRCH ? "no such process" : strerror(errno));
	snprintf(path, sizeof(path), "/proc/%d/pagemap", r->pid);
	r->pagemap = open(path, O_RDONLY | O_CLOEXEC);
	if (r->pagemap < 0)
		return fail("pid %d: cannot open %s: %s", r->pid, path, strerror(errno));
	r->ns_pid = ns_pid_of(r->pid);
	if (!r->ns_pid)
		return fail("pid %d: no NSpid in /proc/%d/status", r->pid, r->pid);
	if (read_vmas(r))
		return -1;
	int64_t room = swap_free(&nr_swap);
	if (room < 0)
		return fail("cannot read /proc/swaps: %s", strerror(errno));
	if (!nr_swap)
		return fail("pid %d: no swap with free space is active: record-ws pages the program out to swap and "
			    "watches its pages come back (swapon a file or a zram device first)",
			    r->pid);
	/* every page resident now goes to swap: it must fit */
	if (scan_all(r, PAGE_IS_PRESENT, count_present))
		return -1;
	if (r->kept * PAGE > (uint64_t)room)
		return fail("pid %d: %" PRIu64 " MiB of private anonymous memory resident, swap has %" PRId64
			    " MiB free",
			    r->pid, r->kept * PAGE >> 20, room >> 20);
	r->kept = 0;
	return 0;
}

/* Page out, then once more what stayed present; what still stays cannot be watched. */
static int page_out(struct recorder *r)
{
	for (size_t i = 0; i < r->nr_v; i++)
		memset(r->v[i].todo, 0xff, (r->v[i].end - r->v[i].start) / PAGE / 64 * 8);
	for (size_t i = 0; i < r->nr_v; i++) { /* the last word's bits up to the VMA's end */
		uint64_t pages = (r->v[i].end - r->v[i].start) / PAGE;
		if (pages % 64)
			r->v[i].todo[pages / 64] = (1ULL << (pages % 64)) - 1;
	}
	if (advise(r, MADV_PAGEOUT, "MADV_PAGEOUT") || advise(r, MADV_PAGEOUT, "MADV_PAGEOUT"))
		return -1;
	return scan_all(r, PAGE_IS_PRESENT | PAGE_IS_SWAPPED, classify);
}

static int record(struct recorder *r, double secs, double interval_ms)
{
	struct sigaction sa = {.sa_handler = on_stop}, old_int, old_term;
	double t0 = now(), end = t0 + secs;
	int ret = 0;

	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	if (page_out(r)) {
		ret = -1;
		goto out;
	}
	fprintf(stderr,
		"lazyrestore record-ws: pid %d: %" PRIu64 " pages paged out, %" PRIu64
		" touched again before the first scan (recorded first), %" PRIu64
		" shared with another process (not watched); watching for %.3f s\n",
		r->pid, r->paged_out, r->early, r->kept, secs);
	while (!stop_requested) {
		double t = now();
		if (t >= end)
			break;
		double nap = interval_ms / 1e3 < end - t ? interval_ms / 1e3 : end - t;
		struct timespec ts = {(time_t)nap, (long)((nap - (double)(time_t)nap) * 1e9)};
		nanosleep(&ts, NULL);
		double s = now();
		if (scan_all(r, PAGE_IS_PRESENT, note)) {
			ret = -1;
			goto out;
		}
		r->scan_ms += (now() - s) * 1e3;
		r->scans++;
	}
	/* bring the untouched pages back from swap, asynchronously; a failure only costs the program swap-ins */
	if (advise(r, MADV_WILLNEED, "MADV_WILLNEED"))
		fprintf(stderr, "lazyrestore record-ws: pid %d: untouched pages stay in swap until touched\n", r->pid);
	fprintf(stderr,
		"lazyrestore record-ws: pid %d: %u pages touched in %.3f s (%" PRIu64
		" scans, %.3f ms each on average)%s\n",
		r->pid, r->nr_order, now() - t0, r->scans, r->scans ? r->scan_ms / (double)r->scans : 0.0,
		r->full ? "; bound reached, later pages not recorded" : "");
out:
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	return ret;
}

/* Keep the pages that lie in private anonymous VMAs of task pid in the dump. */
static int key_to_dump(const char *dir, struct img_ws *ws, const char *from)
{
	struct img_dump dump;
	struct img_err err;
	uint64_t dropped = 0;
	int ret = -1;

	if (img_dump_load(dir, &dump, &err)) {
		img_dump_free(&dump);
		return fail("%s", err.msg);
	}
	if (img_ws_ident(dump.dir, &ws->ident, &err)) {
		fail("%s", err.msg);
		goto out;
	}
	for (size_t i = 0; i < ws->nr_tasks; i++) {
		struct img_ws_task *t = &ws->tasks[i];
		const struct img_mm *mm = img_dump_mm(&dump, t->pid);
		uint32_t kept = 0;
		if (!mm) {
			fail("%s: no live task %u in this dump (%s is of task %u)", dir, t->pid, from, t->pid);
			goto out;
		}
		for (uint32_t k = 0; k < t->nr; k++) {
			long vi = img_find_vma(mm, t->pages[k]);
			if (vi >= 0 && img_vma_can_be_lazy(&mm->vmas[vi]))
				t->pages[kept++] = t->pages[k];
		}
		dropped += t->nr - kept;
		if (t->nr && !kept) {
			fail("%s: none of the %u pages recorded for task %u (%s) lies in its private anonymous memory "
			     "in "
			     "this dump: a recording of another program",
			     dir, t->nr, t->pid, from);
			goto out;
		}
		t->nr = kept;
	}
	if (img_ws_write(dump.dir, ws, &err)) {
		fail("%s", err.msg);
		goto out;
	}
	uint64_t total = 0;
	for (size_t i = 0; i < ws->nr_tasks; i++)
		total += ws->tasks[i].nr;
	fprintf(stderr,
		"lazyrestore record-ws: %s/%s: %" PRIu64 " pages of %zu task(s) keyed to this dump (%" PRIu64
		" outside its private anonymous VMAs dropped)\n",
		dir, IMG_WS_FILE, total, ws->nr_tasks, dropped);
	ret = 0;
out:
	img_dump_free(&dump);
	return ret;
}

static void recorder_free(struct recorder *r)
{
	for (size_t i = 0; i < r->nr_v; i++)
		free(r->v[i].todo);
	free(r->v);
	free(r->order);
	if (r->pidfd >= 0)
		close(r->pidfd);
	if (r->pagemap >= 0)
		close(r->pagemap);
}

static int parse_num(const char *s, double min, double max, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	return errno || end == s || *end || !(*out >= min && *out <= max) ? -1 : 0;
}

static int do_record(pid_t pid, double secs, double interval, const char *dir, const char *out)
{
	struct recorder r = {.pid = pid, .pidfd = -1, .pagemap = -1};
	struct img_ws ws = {0};
	struct img_ws_task task;
	struct img_err err;
	struct img_dir *d = NULL;
	int ret = 1;

	if (dir) { /* the dump must be there before the window, not found wanting after it */
		if (img_dir_open(dir, &d, &err) || img_ws_ident(d, &ws.ident, &err)) {
			fail("%s (with --images-dir the dump is taken before the window: criu dump --leave-running; "
			     "otherwise record with -o FILE and key it with --from FILE after the dump)",
			     err.msg);
			goto out;
		}
		img_dir_close(d);
		d = NULL;
	}
	if (setup(&r) || record(&r, secs, interval))
		goto out;
	task = (struct img_ws_task){.pid = r.ns_pid, .nr = r.nr_order, .pages = r.order};
	ws = (struct img_ws){.ident = 0, .nr_tasks = 1, .tasks = &task};
	if (out) {
		if (img_ws_write_file(out, &ws, &err)) {
			fail("%s", err.msg);
			goto out;
		}
		fprintf(stderr,
			"lazyrestore record-ws: %s: %u pages of pid %d (task %u in its dump), keyed to no dump yet\n",
			out, task.nr, pid, task.pid);
		ret = 0;
		if (dir && key_to_dump(dir, &ws, out))
			ret = 1;
	} else {
		ret = key_to_dump(dir, &ws, "the recording") ? 1 : 0;
	}
out:
	recorder_free(&r);
	return ret;
}

static int do_key(const char *from, const char *dir)
{
	struct img_ws ws;
	struct img_err err;

	if (img_ws_read_file(from, &ws, &err)) {
		fail("%s", err.msg);
		return 1;
	}
	int ret = key_to_dump(dir, &ws, from) ? 1 : 0;
	img_ws_free(&ws);
	return ret;
}

int cmd_record_ws(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"pid", required_argument, NULL, 'p'},
	    {"for", required_argument, NULL, 't'},
	    {"images-dir", required_argument, NULL, 'D'},
	    {"output", required_argument, NULL, 'o'},
	    {"from", required_argument, NULL, 'f'},
	    {"interval", required_argument, NULL, 'i'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *dir = NULL, *out = NULL, *from = NULL;
	double pid = 0, secs = -1, interval = DEFAULT_INTERVAL;
	int c;

	while ((c = getopt_long(argc, argv, "p:t:D:o:f:i:h", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (parse_num(optarg, 1, 4194304, &pid) || pid != (double)(pid_t)pid) {
				fail("--pid %s: not a process id", optarg);
				return 2;
			}
			break;
		case 't':
			if (parse_num(optarg, 0.001, 86400, &secs)) {
				fail("--for %s: not a number of seconds in [0.001, 86400]", optarg);
				return 2;
			}
			break;
		case 'i':
			if (parse_num(optarg, 0.1, 10000, &interval)) {
				fail("--interval %s: not a number of milliseconds in [0.1, 10000]", optarg);
				return 2;
			}
			break;
		case 'D':
			dir = optarg;
			break;
		case 'o':
			out = optarg;
			break;
		case 'f':
			from = optarg;
			break;
		case 'h':
			fputs(record_usage, stdout);
			return 0;
		default:
			fprintf(stderr, "\n%s", record_usage);
			return 2;
		}
	}
	if (optind != argc) {
		fail("unexpected argument '%s'", argv[optind]);
		return 2;
	}
	if (from) {
		if (!dir || pid || secs >= 0 || out) {
			fail("--from FILE takes --images-dir DIR and nothing else");
			return 2;
		}
		return do_key(from, dir);
	}
	if (!pid || secs < 0 || (!dir && !out)) {
		fail("needs --pid PID, --for SECONDS and --images-dir DIR or -o FILE (see --help)");
		return 2;
	}
	return do_record((pid_t)pid, secs, interval, dir, out);
}

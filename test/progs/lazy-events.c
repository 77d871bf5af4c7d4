// SPDX-License-Identifier: MIT
/*
 * lazy-events: dump targets that act the moment they are restored, while
 * their memory is still being served lazily.
 *
 *   lazy-events -d DIR -M events|random|tree [-m MIB] [-n TOUCHES]
 *
 * Each process fills its regions with pattern_word(address, seed), writes
 * DIR/ready.<pid>, then sleeps in 1 ms steps.  A gap of more than 400 ms in
 * CLOCK_REALTIME (criu restores CLOCK_MONOTONIC through a time namespace, so
 * that one shows no gap) means it was frozen, dumped and restored: it runs its
 * mode at once and writes DIR/result.<pid> ("OK ..." or "BAD ...").
 *   events  fork (the child DONTNEEDs and mremaps on its own), mremap, munmap
 *           + fresh mmap, madvise(DONTNEED) of every other MiB, then every
 *           word of every region is checked (removed pages must read zero).
 *   random  -n random single-word reads of one -m MiB region (their latency
 *           in µs goes to DIR/lat.<pid>), then every word is checked.
 *   tree    a root and two children, each with three threads checking a
 *           third of the process's region concurrently.
 * The result line also tells how many pages were not resident at the start
 * (mincore), i.e. how lazy the restore still was.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test/progs/pattern.h"
#include "test/progs/progs.h"

#define PAGE   4096UL
#define MIB    (1UL << 20)
#define GAP_NS 400000000LL

static const char *dir;

static int64_t wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static uint8_t *map_anon(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		prog_die("mmap");
	return p;
}

static void fill(uint8_t *p, size_t len, uint64_t seed)
{
	for (size_t off = 0; off < len; off += 8)
		*(uint64_t *)(p + off) = pattern_word((uint64_t)(uintptr_t)(p + off), seed);
}

/*
 * Check [p, p+len): words must be pattern_word(orig + off, seed), or 0 when
 * seed is 0.  Returns 0, or 1 with msg describing the first wrong word.
 */
static int check(const char *what, const uint8_t *p, size_t len, uintptr_t orig, uint64_t seed, char *msg,
		 size_t msglen)
{
	for (size_t off = 0; off < len; off += 8) {
		uint64_t want = seed ? pattern_word(orig + off, seed) : 0;
		uint64_t got = *(const volatile uint64_t *)(p + off);
		if (got != want) {
			snprintf(msg, msglen, "BAD %s %p want %016llx got %016llx", what, p + off,
				 (unsigned long long)want, (unsigned long long)got);
			return 1;
		}
	}
	return 0;
}

/* Pages of [p, p+len) not resident now. */
static size_t not_resident(const uint8_t *p, size_t len)
{
	size_t n = len / PAGE, missing = 0;
	unsigned char *v = malloc(n);

	if (!v || mincore((void *)p, len, v))
		prog_die("mincore");
	for (size_t i = 0; i < n; i++)
		missing += !(v[i] & 1);
	free(v);
	return missing;
}

/* Sleep in 1 ms steps until a clock gap shows we were restored. */
static void wait_restored(void)
{
	int64_t last = wall_ns();
	for (;;) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
		int64_t t = wall_ns();
		if (t - last > GAP_NS)
			return;
		last = t;
	}
}

/* ---- events ---- */

struct ev_regions {
	uint8_t *a, *b, *c, *d;
	size_t la, lb, lc, ld;
};

static void events_child(const struct ev_regions *r, int wfd)
{
	char msg[256] = "OK";
	uintptr_t b_orig = (uintptr_t)r->b;
	int bad = 0;

	/* Our own events: DONTNEED the first 8 MiB of a, move b. */
	if (madvise(r->a, 8 * MIB, MADV_DONTNEED))
		prog_die("child madvise");
	uint8_t *nb = mremap(r->b, r->lb, r->lb, MREMAP_MAYMOVE | MREMAP_FIXED,
			     map_anon(r->lb)); /* a fresh spot, replaced by the move */
	if (nb == MAP_FAILED)
		prog_die("child mremap");
	bad = check("child-a-removed", r->a, 8 * MIB, 0, 0, msg, sizeof(msg)) ||
	      check("child-a", r->a + 8 * MIB, r->la - 8 * MIB, (uintptr_t)r->a + 8 * MIB, 11, msg, sizeof(msg)) ||
	      check("child-b-moved", nb, r->lb, b_orig, 12, msg, sizeof(msg)) ||
	      check("child-c", r->c, r->lc, (uintptr_t)r->c, 13, msg, sizeof(msg)) ||
	      check("child-d", r->d, r->ld, (uintptr_t)r->d, 14, msg, sizeof(msg));
	if (write(wfd, msg, strlen(msg) + 1) < 0)
		prog_die("child write");
	_exit(bad);
}

static void run_events(void)
{
	struct ev_regions r = {.la = 64 * MIB, .lb = 32 * MIB, .lc = 32 * MIB, .ld = 64 * MIB};
	char msg[256] = "", cmsg[256] = "no child result", res[700];
	int pfd[2], st, bad;

	r.a = map_anon(r.la);
	r.b = map_anon(r.lb);
	r.c = map_anon(r.lc);
	r.d = map_anon(r.ld);
	fill(r.a, r.la, 11);
	fill(r.b, r.lb, 12);
	fill(r.c, r.lc, 13);
	fill(r.d, r.ld, 14);
	if (pipe(pfd))
		prog_die("pipe");
	prog_write_file(dir, "ready", "ready\n");
	wait_restored();

	size_t lazy =
	    not_resident(r.a, r.la) + not_resident(r.b, r.lb) + not_resident(r.c, r.lc) + not_resident(r.d, r.ld);
	pid_t child = fork();
	if (child < 0)
		prog_die("fork");
	if (child == 0)
		events_child(&r, pfd[1]);

	/* mremap b elsewhere, munmap the first half of c and map fresh memory there. */
	uintptr_t b_orig = (uintptr_t)r.b;
	uint8_t *nb = mremap(r.b, r.lb, r.lb, MREMAP_MAYMOVE | MREMAP_FIXED, map_anon(r.lb));
	if (nb == MAP_FAILED)
		prog_die("mremap");
	if (munmap(r.c, r.lc / 2))
		prog_die("munmap");
	if (mmap(r.c, r.lc / 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
		prog_die("mmap fixed");
	/* DONTNEED every other MiB of d, then write a new pattern on one page of each. */
	for (size_t off = MIB; off < r.ld; off += 2 * MIB) {
		if (madvise(r.d + off, MIB, MADV_DONTNEED))
			prog_die("madvise");
		fill(r.d + off, PAGE, 99);
	}
	bad = check("a", r.a, r.la, (uintptr_t)r.a, 11, msg, sizeof(msg)) ||
	      check("b-moved", nb, r.lb, b_orig, 12, msg, sizeof(msg)) ||
	      check("c-fresh", r.c, r.lc / 2, 0, 0, msg, sizeof(msg)) ||
	      check("c", r.c + r.lc / 2, r.lc / 2, (uintptr_t)r.c + r.lc / 2, 13, msg, sizeof(msg));
	for (size_t off = 0; !bad && off < r.ld; off += MIB) {
		if ((off / MIB) % 2 == 0)
			bad = check("d", r.d + off, MIB, (uintptr_t)r.d + off, 14, msg, sizeof(msg));
		else
			bad = check("d-rewritten", r.d + off, PAGE, (uintptr_t)r.d + off, 99, msg, sizeof(msg)) ||
			      check("d-removed", r.d + off + PAGE, MIB - PAGE, 0, 0, msg, sizeof(msg));
	}
	close(pfd[1]);
	ssize_t n = read(pfd[0], cmsg, sizeof(cmsg) - 1);
	cmsg[n > 0 ? n : 0] = 0;
	if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st))
		bad = 1;
	if (!bad)
		snprintf(res, sizeof(res), "OK %zu pages, %zu not resident at start\n",
			 (r.la + r.lb + r.lc + r.ld) / PAGE, lazy);
	else
		snprintf(res, sizeof(res), "BAD parent: %s; child: %s\n", msg[0] ? msg : "OK", cmsg);
	prog_write_file(dir, "result", res);
}

/* ---- random ---- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void run_random(size_t mib, size_t touches)
{
	size_t len = mib * MIB, pages = len / PAGE;
	uint8_t *p = map_anon(len);
	uint64_t *lat = calloc(touches, sizeof(*lat)), state = 88172645463325252ULL;
	char msg[256] = "", res[512];

	if (!lat)
		prog_die("calloc");
	fill(p, len, 21);
	prog_write_file(dir, "ready", "ready\n");
	wait_restored();
	size_t lazy = not_resident(p, len);
	for (size_t i = 0; i < touches; i++) {
		state ^= state << 13, state ^= state >> 7, state ^= state << 17; /* xorshift */
		size_t pg = state % pages, word = (state >> 32) % (PAGE / 8);
		uint8_t *a = p + pg * PAGE + word * 8;
		int64_t t0 = now_ns();
		uint64_t got = *(volatile uint64_t *)a;
		lat[i] = (uint64_t)(now_ns() - t0);
		if (got != pattern_word((uintptr_t)a, 21)) {
			snprintf(res, sizeof(res), "BAD random touch %p got %016llx\n", a, (unsigned long long)got);
			prog_write_file(dir, "result", res);
			return;
		}
	}
	/* Latencies for bench/: one line per touch, in µs. */
	size_t cap = touches * 16 + 1, n = 0;
	char *text = malloc(cap);
	if (!text)
		prog_die("malloc");
	for (size_t i = 0; i < touches; i++)
		n += snprintf(text + n, cap - n, "%.1f\n", lat[i] / 1000.0);
	prog_write_file(dir, "lat", text);
	qsort(lat, touches, sizeof(*lat), cmp_u64);
	if (check("random-region", p, len, (uintptr_t)p, 21, msg, sizeof(msg)))
		snprintf(res, sizeof(res), "%s\n", msg);
	else
		snprintf(res, sizeof(res), "OK %zu pages, %zu not resident at start, touch p50 %.1f us\n", pages, lazy,
			 touches ? lat[touches / 2] / 1000.0 : 0);
	prog_write_file(dir, "result", res);
}

/* ---- tree ---- */

struct slice {
	uint8_t *p;
	size_t len;
	uint64_t seed;
	char msg[256];
	int bad;
};

static void *check_slice(void *arg)
{
	struct slice *s = arg;

	wait_restored();
	s->bad = check("slice", s->p, s->len, (uintptr_t)s->p, s->seed, s->msg, sizeof(s->msg));
	return NULL;
}

static void tree_process(int idx, size_t mib)
{
	size_t len = mib * MIB, third = len / 3 & ~(PAGE - 1);
	uint8_t *p = map_anon(len);
	struct slice s[3];
	pthread_t th[2];
	char res[512];

	fill(p, len, 30 + idx);
	for (int i = 0; i < 3; i++)
		s[i] = (struct slice){.p = p + i * third, .len = i == 2 ? len - 2 * third : third, .seed = 30 + idx};
	for (int i = 0; i < 2; i++)
		if (pthread_create(&th[i], NULL, check_slice, &s[i]))
			prog_die("pthread_create");
	prog_write_file(dir, "ready", "ready\n");
	check_slice(&s[2]);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 3; i++)
		if (s[i].bad) {
			snprintf(res, sizeof(res), "%s (thread %d)\n", s[i].msg, i);
			prog_write_file(dir, "result", res);
			return;
		}
	snprintf(res, sizeof(res), "OK %zu pages, 3 threads\n", len / PAGE);
	prog_write_file(dir, "result", res);
}

static void run_tree(size_t mib)
{
	for (int i = 1; i <= 2; i++) {
		pid_t c = fork();
		if (c < 0)
			prog_die("fork");
		if (c == 0) {
			tree_process(i, mib);
			pause(); /* keep the tree shape until killed */
			_exit(0);
		}
	}
	tree_process(0, mib);
}

int main(int argc, char **argv)
{
	const char *mode = NULL;
	size_t mib = 64, touches = 2000;
	int opt;

	while ((opt = getopt(argc, argv, "d:M:m:n:")) != -1) {
		switch (opt) {
		case 'd':
			dir = optarg;
			break;
		case 'M':
			mode = optarg;
			break;
		case 'm':
			mib = strtoul(optarg, NULL, 0);
			break;
		case 'n':
			touches = strtoul(optarg, NULL, 0);
			break;
		default:
			goto usage;
		}
	}
	if (!dir || !mode || !mib)
		goto usage;
	if (!strcmp(mode, "events"))
		run_events();
	else if (!strcmp(mode, "random"))
		run_random(mib, touches);
	else if (!strcmp(mode, "tree"))
		run_tree(mib);
	else
		goto usage;
	for (;;)
		pause(); /* stay for the test to kill */
usage:
	fprintf(stderr, "usage: lazy-events -d DIR -M events|random|tree [-m MIB] [-n TOUCHES]\n");
	return 2;
}

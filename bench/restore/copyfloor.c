// SPDX-License-Identifier: MIT
/*
 * copyfloor: the fastest this machine puts a dump's pages into a
 * uffd-registered anonymous region, with nothing else in the way (no faults,
 * no hand-off, no restored program), for every way of getting the bytes from
 * the pages file, so the benchmark's "all resident" figures can be read
 * against what the kernel allows and an engine can pick its source.
 *
 *   copyfloor -f PAGES_IMG -m MIB [-k KINDS] [-s STEPS_KIB] [-t THREADS] [-r REPS] [-q]
 *   copyfloor -f PAGES_IMG -P MIB [-k KINDS] [-s STEP_KIB] [-r ROUNDS]
 *
 * The first form runs every cell of KINDS x STEPS x THREADS (comma lists;
 * default: every kind, 16,64,256,1024,4096 KiB, 1,2 threads) REPS times
 * (default 1), the cells of each repetition in turn, forwards on odd and
 * backwards on even repetitions (A B .. B A), and prints one TSV row per run:
 *   kind  step_kib  threads  rep  seconds  gbps  cpu_s
 * (cpu_s: the copying threads' CPU time after their buffers are set up, summed).
 * -q (quick) defaults KINDS to mmap-populate,pread,preadv and STEPS to 64,1024.
 * Each run copies the first MIB of PAGES_IMG into a fresh anonymous region
 * registered with a new userfaultfd, THREADS threads taking chunks of
 * max(2 MiB, STEP) in turn, STEP per install.  Timed: from before the source
 * is set up (mmap, buffers) until every thread is done.  Then the region is
 * checked (every page present, 8 bytes of one page in 64 and all of one page
 * per 2 MiB equal to the file's) and unmapped.  Kinds (the source the bytes are copied from):
 *   mmap               UFFDIO_COPY straight from a MAP_PRIVATE mmap of the file
 *   mmap-populate      same, MADV_POPULATE_READ per chunk first (the page server's way)
 *   mmap-map-populate  same, the whole mapping made with MAP_POPULATE
 *   mmap-hugepage      mmap-populate after MADV_HUGEPAGE on the mapping
 *   mmap-sequential    mmap after MADV_SEQUENTIAL on the mapping
 *   pread              pread of STEP into a reused buffer, then UFFDIO_COPY
 *   preadv             one preadv per chunk into STEP-sized iovecs of a reused
 *                      chunk buffer, then one UFFDIO_COPY per STEP
 *   odirect            pread from an O_DIRECT descriptor into a reused aligned
 *                      buffer (the file is in page cache; O_DIRECT reads the disk)
 *   odirect-cold       same, the file evicted from page cache before the run
 *                      (POSIX_FADV_DONTNEED) and read back in after it, untimed
 *   memfd-sendfile     sendfile of STEP into a reused memfd, UFFDIO_COPY from its
 *                      mapping (copy_file_range gives EXDEV from ext4 to tmpfs)
 *   move               pread into an anonymous buffer of this process, then
 *                      UFFDIO_MOVE of its pages (no second copy).  UFFDIO_MOVE
 *                      needs source and destination in the uffd's own mm: a
 *                      daemon serving another process cannot use it (the
 *                      buffer would have to be in the restored task).  In
 *                      this process it shows what that would give.
 * The second form is the run-time probe an engine could use: ROUNDS (default
 * 2) rounds of KINDS (default mmap-populate,pread) in turn over the first MIB
 * at STEP (default 1024), one thread; prints each kind's best CPU and wall
 * seconds, the winner (by CPU time) and the probe's cost.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "lib/uffd-compat.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define PAGE	   4096UL
#define CHUNK	   (2UL << 20)
#define MAX_THREAD 8
#define MAX_CELL   512

enum src { S_MMAP, S_PREAD, S_PREADV, S_DIRECT, S_MEMFD, S_MOVE };

#define A_POP	 1  /* MADV_POPULATE_READ per chunk */
#define A_MAPPOP 2  /* MAP_POPULATE */
#define A_HUGE	 4  /* MADV_HUGEPAGE */
#define A_SEQ	 8  /* MADV_SEQUENTIAL */
#define A_COLD	 16 /* evict the file from page cache first */

struct kind {
	const char *name;
	enum src src;
	int flags;
};

static const struct kind kinds[] = {
    {"mmap", S_MMAP, 0},
    {"mmap-populate", S_MMAP, A_POP},
    {"mmap-map-populate", S_MMAP, A_MAPPOP},
    {"mmap-hugepage", S_MMAP, A_HUGE | A_POP},
    {"mmap-sequential", S_MMAP, A_SEQ},
    {"pread", S_PREAD, 0},
    {"preadv", S_PREADV, 0},
    {"odirect", S_DIRECT, 0},
    {"odirect-cold", S_DIRECT, A_COLD},
    {"memfd-sendfile", S_MEMFD, 0},
    {"move", S_MOVE, 0},
};
#define NKIND (sizeof(kinds) / sizeof(kinds[0]))

struct job {
	const struct kind *k;
	int uffd, fd, dfd; /* the file, and the file opened O_DIRECT */
	const char *src;   /* the file's mapping (S_MMAP) */
	char *dst;
	size_t len, step, chunk;
	size_t next; /* next chunk, taken atomically */
	int failed;
	uint64_t cpu_ns; /* the copiers' CPU time, summed atomically */
};

static double clock_s(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double now(void)
{
	return clock_s(CLOCK_MONOTONIC);
}

/* install: UFFDIO_COPY (or UFFDIO_MOVE) len bytes from src to dst. */
static int install(int uffd, uint64_t dst, uint64_t src, uint64_t len, int move)
{
	while (len) {
		int64_t done;
		int r;

		if (move) {
			struct uffdio_move m = {.dst = dst, .src = src, .len = len};
			r = ioctl(uffd, UFFDIO_MOVE, &m);
			done = m.move;
		} else {
			struct uffdio_copy c = {.dst = dst, .src = src, .len = len};
			r = ioctl(uffd, UFFDIO_COPY, &c);
			done = c.copy;
		}
		if (!r)
			return 0;
		if (errno != EINTR && errno != EAGAIN) {
			perror(move ? "copyfloor: UFFDIO_MOVE" : "copyfloor: UFFDIO_COPY");
			return -1;
		}
		if (done > 0) { /* partly done: go on after it */
			dst += (uint64_t)done;
			src += (uint64_t)done;
			len -= (uint64_t)done;
		}
	}
	return 0;
}

static int read_full(int fd, char *buf, size_t len, off_t off)
{
	while (len) {
		ssize_t n = pread(fd, buf, len, off);

		if (n <= 0) {
			fprintf(stderr, "copyfloor: pread at %lld: %s\n", (long long)off,
				n ? strerror(errno) : "end of file");
			return -1;
		}
		buf += n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

/* fill_memfd: the file's [off, off+len) into the memfd at 0, in the kernel. */
static int fill_memfd(int mfd, int fd, size_t len, off_t off)
{
	if (lseek(mfd, 0, SEEK_SET))
		return -1;
	while (len) {
		ssize_t n = sendfile(mfd, fd, &off, len);

		if (n <= 0) {
			perror("copyfloor: sendfile");
			return -1;
		}
		len -= (size_t)n;
	}
	return 0;
}

struct thr {
	char *buf; /* reused buffer, or the memfd's mapping */
	int mfd;
	struct iovec iov[CHUNK / PAGE];
};

static int thr_setup(struct job *j, struct thr *t)
{
	size_t blen = j->k->src == S_PREADV ? j->chunk : j->step;

	t->mfd = -1;
	t->buf = NULL;
	if (j->k->src == S_MMAP)
		return 0;
	if (j->k->src == S_MEMFD) {
		t->mfd = memfd_create("copyfloor", MFD_CLOEXEC);
		if (t->mfd < 0 || ftruncate(t->mfd, (off_t)blen)) {
			perror("copyfloor: memfd");
			return -1;
		}
		t->buf = mmap(NULL, blen, PROT_READ | PROT_WRITE, MAP_SHARED, t->mfd, 0);
	} else {
		t->buf = mmap(NULL, blen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	}
	if (t->buf == MAP_FAILED) {
		perror("copyfloor: buffer");
		return -1;
	}
	if (j->k->src != S_MOVE)
		memset(t->buf, 0, blen); /* reused: its pages are there before the first read */
	return 0;
}

static void thr_free(struct job *j, struct thr *t)
{
	if (t->buf && t->buf != MAP_FAILED)
		munmap(t->buf, j->k->src == S_PREADV ? j->chunk : j->step);
	if (t->mfd >= 0)
		close(t->mfd);
}

static int copy_chunk(struct job *j, struct thr *t, size_t off)
{
	size_t end = off + j->chunk < j->len ? off + j->chunk : j->len;
	uint64_t dst = (uintptr_t)j->dst;

	if (j->k->src == S_MMAP && (j->k->flags & A_POP) &&
	    madvise((void *)(j->src + off), end - off, MADV_POPULATE_READ)) {
		perror("copyfloor: MADV_POPULATE_READ");
		return -1;
	}
	if (j->k->src == S_PREADV) {
		int n = 0;

		for (size_t o = off; o < end; o += j->step, n++) {
			t->iov[n].iov_base = t->buf + (o - off);
			t->iov[n].iov_len = end - o < j->step ? end - o : j->step;
		}
		ssize_t r = preadv(j->fd, t->iov, n, (off_t)off);
		if (r != (ssize_t)(end - off) && read_full(j->fd, t->buf, end - off, (off_t)off))
			return -1;
	}
	for (size_t o = off; o < end; o += j->step) {
		size_t l = end - o < j->step ? end - o : j->step;
		uint64_t src = 0;
		int move = 0;

		switch (j->k->src) {
		case S_MMAP:
			src = (uintptr_t)j->src + o;
			break;
		case S_PREADV:
			src = (uintptr_t)t->buf + (o - off);
			break;
		case S_PREAD:
		case S_DIRECT:
			if (read_full(j->k->src == S_DIRECT ? j->dfd : j->fd, t->buf, l, (off_t)o))
				return -1;
			src = (uintptr_t)t->buf;
			break;
		case S_MEMFD:
			if (fill_memfd(t->mfd, j->fd, l, (off_t)o))
				return -1;
			src = (uintptr_t)t->buf;
			break;
		case S_MOVE:
			/* the last move took the buffer's pages: allocate them in one call */
			if (madvise(t->buf, l, MADV_POPULATE_WRITE) || read_full(j->fd, t->buf, l, (off_t)o))
				return -1;
			src = (uintptr_t)t->buf;
			move = 1;
			break;
		}
		if (install(j->uffd, dst + o, src, l, move))
			return -1;
	}
	return 0;
}

static void *copier(void *arg)
{
	struct job *j = arg;
	struct thr t;

	if (thr_setup(j, &t)) {
		__atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
		thr_free(j, &t);
		return NULL;
	}
	/* CPU time from here: the buffer's setup is paid once per engine, not per copy */
	double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
	for (;;) {
		size_t off = __atomic_fetch_add(&j->next, j->chunk, __ATOMIC_RELAXED);
		if (off >= j->len || __atomic_load_n(&j->failed, __ATOMIC_RELAXED))
			break;
		if (copy_chunk(j, &t, off))
			__atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
	}
	__atomic_fetch_add(&j->cpu_ns, (uint64_t)((clock_s(CLOCK_THREAD_CPUTIME_ID) - c0) * 1e9), __ATOMIC_RELAXED);
	thr_free(j, &t);
	return NULL;
}

static int open_uffd(void)
{
	int fd = lr_uffd_new(O_CLOEXEC | O_NONBLOCK, UFFD_FEATURE_MOVE);

	if (fd < 0)
		perror("copyfloor: userfaultfd");
	return fd;
}

/* resident: how much of the file's first len bytes is in page cache (0..1). */
static double resident(int fd, size_t len)
{
	size_t pages = len / PAGE, in = 0;
	unsigned char *vec = malloc(pages);
	void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);

	if (!vec || m == MAP_FAILED || mincore(m, len, vec)) {
		free(vec);
		if (m != MAP_FAILED)
			munmap(m, len);
		return -1;
	}
	for (size_t i = 0; i < pages; i++)
		in += vec[i] & 1;
	munmap(m, len);
	free(vec);
	return (double)in / (double)pages;
}

/*
 * verify: every page of the region is there (mincore), and its bytes are the
 * file's (pread): 8 bytes of one page in 64, all of one page per 2 MiB.  A
 * sample, not every page: on this VM each first touch of a page costs a few
 * us, and the check is not timed but makes the bench longer.
 */
static int verify(int fd, const char *dst, size_t len)
{
	size_t pages = len / PAGE;
	unsigned char *vec = malloc(pages);
	char ref[PAGE];
	int bad = 0;

	if (!vec || mincore((void *)dst, len, vec)) {
		perror("copyfloor: mincore");
		bad = 1;
	}
	for (size_t i = 0; i < pages && !bad; i++)
		if (!(vec[i] & 1)) {
			fprintf(stderr, "copyfloor: page %zu of the region is missing\n", i);
			bad = 1;
		}
	for (size_t i = 0; i < pages && !bad; i += 64) {
		size_t o = i * PAGE + (((i * 2654435761UL) >> 7) % PAGE & ~7UL);

		if (read_full(fd, ref, 8, (off_t)o) || memcmp(dst + o, ref, 8))
			bad = 1;
		else if (i % (CHUNK / PAGE) == 0 &&
			 (read_full(fd, ref, PAGE, (off_t)(i * PAGE)) || memcmp(dst + i * PAGE, ref, PAGE)))
			bad = 1;
	}
	free(vec);
	return bad ? -1 : 0;
}

/*
 * one_run: copy len bytes with kind k, step and threads; wall-clock seconds,
 * or -1.  *cpu: the CPU seconds of the copying threads (the mmap, if any, is
 * in the wall clock only).
 */
static double one_run(const struct kind *k, int fd, int dfd, size_t len, size_t step, long threads, double *cpu)
{
	struct job j = {.k = k, .fd = fd, .dfd = dfd, .len = len, .step = step};
	pthread_t th[MAX_THREAD];
	double t0, t = -1;
	long started = 0;

	j.chunk = step > CHUNK ? step : CHUNK;
	j.src = MAP_FAILED;
	if (k->flags & A_COLD) {
		double r;

		int e = posix_fadvise(fd, 0, (off_t)len, POSIX_FADV_DONTNEED);

		if (e)
			fprintf(stderr, "copyfloor: POSIX_FADV_DONTNEED: %s\n", strerror(e));
		r = resident(fd, len);
		if (r > 0.01)
			fprintf(stderr, "copyfloor: %s: %.0f%% of the file still in page cache\n", k->name, r * 100);
	}
	j.dst = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	j.uffd = open_uffd();
	if (j.dst == MAP_FAILED || j.uffd < 0) {
		perror("copyfloor: destination");
		goto out;
	}
	struct uffdio_register reg = {.range = {.start = (uintptr_t)j.dst, .len = len},
				      .mode = UFFDIO_REGISTER_MODE_MISSING};
	if (ioctl(j.uffd, UFFDIO_REGISTER, &reg)) {
		perror("copyfloor: UFFDIO_REGISTER");
		goto out;
	}
	t0 = now();
	if (k->src == S_MMAP) {
		j.src = mmap(NULL, len, PROT_READ, MAP_PRIVATE | (k->flags & A_MAPPOP ? MAP_POPULATE : 0), fd, 0);
		if (j.src == MAP_FAILED) {
			perror("copyfloor: mmap");
			goto out;
		}
		if ((k->flags & A_HUGE) && madvise((void *)j.src, len, MADV_HUGEPAGE))
			perror("copyfloor: MADV_HUGEPAGE");
		if ((k->flags & A_SEQ) && madvise((void *)j.src, len, MADV_SEQUENTIAL))
			perror("copyfloor: MADV_SEQUENTIAL");
	}
	for (; started < threads; started++)
		if (pthread_create(&th[started], NULL, copier, &j)) {
			fprintf(stderr, "copyfloor: can't start thread %ld\n", started);
			j.failed = 1;
			break;
		}
	for (long i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	t = now() - t0;
	*cpu = (double)j.cpu_ns / 1e9;
	if (j.failed)
		t = -1;
	else if (verify(fd, j.dst, len)) {
		fprintf(stderr, "copyfloor: %s: copied pages differ from the file\n", k->name);
		t = -1;
	}
out:
	if (j.src != MAP_FAILED)
		munmap((void *)j.src, len);
	if (j.dst != MAP_FAILED)
		munmap(j.dst, len);
	if (j.uffd >= 0)
		close(j.uffd);
	if (k->flags & A_COLD) { /* read the file back in for the runs that want it cached */
		char *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);

		if (m != MAP_FAILED) {
			if (madvise(m, len, MADV_POPULATE_READ))
				perror("copyfloor: MADV_POPULATE_READ");
			munmap(m, len);
		}
	}
	return t;
}

static const struct kind *find_kind(const char *name)
{
	for (size_t i = 0; i < NKIND; i++)
		if (!strcmp(kinds[i].name, name))
			return &kinds[i];
	return NULL;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: copyfloor -f PAGES_IMG -m MIB [-k KIND,..] [-s STEP_KIB,..] [-t THREADS,..] [-r REPS] [-q]\n"
		"       copyfloor -f PAGES_IMG -P MIB [-k KIND,..] [-s STEP_KIB] [-r ROUNDS]\n"
		"kinds:");
	for (size_t i = 0; i < NKIND; i++)
		fprintf(stderr, " %s", kinds[i].name);
	fprintf(stderr, "\nsteps: 4..65536 KiB, multiples of 4; threads: 1..%d\n", MAX_THREAD);
	exit(2);
}

/* parse_list: a comma list of numbers into v (at most max); their count, or -1. */
static int parse_list(char *s, long *v, int max)
{
	int n = 0;

	for (char *save = NULL, *tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *e;

		if (n == max)
			return -1;
		v[n] = strtol(tok, &e, 10);
		if (*e || e == tok)
			return -1;
		n++;
	}
	return n;
}

/*
 * probe: the engine's run-time choice, timed.  Each kind's best run is taken
 * by the copying thread's CPU time, not the wall clock: on a loaded machine a
 * run of a few ms is decided by when the scheduler lets it run.  One line per
 * kind (best CPU and wall seconds), then the winner, the copies' wall seconds
 * (what an engine pays, less whatever of it is useful copying) and the whole
 * probe's wall clock with this program's setup and checks.
 */
static int probe(int fd, int dfd, size_t len, const struct kind **ks, int nk, size_t step, long rounds)
{
	double best[NKIND], bwall[NKIND], t0 = now(), copies = 0;
	int win = 0;

	for (int i = 0; i < nk; i++)
		best[i] = bwall[i] = -1;
	for (long r = 0; r < rounds; r++)
		for (int i = 0; i < nk; i++) {
			double cpu, t = one_run(ks[i], fd, dfd, len, step, 1, &cpu);

			if (t < 0)
				return 1;
			copies += t;
			if (best[i] < 0 || cpu < best[i])
				best[i] = cpu;
			if (bwall[i] < 0 || t < bwall[i])
				bwall[i] = t;
		}
	double wall = now() - t0;
	for (int i = 0; i < nk; i++) {
		printf("%s\t%zu\tcpu %.5f\twall %.5f\n", ks[i]->name, step >> 10, best[i], bwall[i]);
		if (best[i] < best[win])
			win = i;
	}
	printf("winner\t%s\tcopies %.4f s, wall %.4f s for %ld x %d runs of %zu MiB\n", ks[win]->name, copies, wall,
	       rounds, nk, len >> 20);
	return 0;
}

int main(int argc, char **argv)
{
	const struct kind *ks[NKIND];
	long steps[16], threads[MAX_THREAD], reps = 0, mib = 0, probe_mib = 0;
	int nk = 0, ns = 0, nt = 0, quick = 0, opt;
	char *klist = NULL, *slist = NULL, *tlist = NULL;
	const char *file = NULL;
	struct stat st;

	while ((opt = getopt(argc, argv, "f:m:k:s:t:r:qP:")) != -1) {
		switch (opt) {
		case 'f':
			file = optarg;
			break;
		case 'm':
			mib = strtol(optarg, NULL, 10);
			break;
		case 'P':
			probe_mib = strtol(optarg, NULL, 10);
			break;
		case 'k':
			klist = optarg;
			break;
		case 's':
			slist = optarg;
			break;
		case 't':
			tlist = optarg;
			break;
		case 'r':
			reps = strtol(optarg, NULL, 10);
			break;
		case 'q':
			quick = 1;
			break;
		default:
			usage();
		}
	}
	if (!file || (mib <= 0) == (probe_mib <= 0) || reps < 0)
		usage();
	char kdef[] = "mmap-populate,pread,preadv", pdef[] = "mmap-populate,pread", sdef[] = "16,64,256,1024,4096",
	     sq[] = "64,1024", sp[] = "1024", tdef[] = "1,2";
	if (klist || quick || probe_mib) {
		char *save = NULL;

		for (char *tok = strtok_r(klist	      ? klist
					  : probe_mib ? pdef
						      : kdef,
					  ",", &save);
		     tok; tok = strtok_r(NULL, ",", &save)) {
			if (!(ks[nk] = find_kind(tok)) || nk == (int)NKIND - 1)
				usage();
			nk++;
		}
	} else {
		for (size_t i = 0; i < NKIND; i++)
			ks[nk++] = &kinds[i];
	}
	ns = parse_list(slist ? slist : probe_mib ? sp : quick ? sq : sdef, steps, 16);
	nt = parse_list(tlist ? tlist : tdef, threads, MAX_THREAD);
	if (ns <= 0 || nt <= 0)
		usage();
	for (int i = 0; i < ns; i++)
		if (steps[i] < 4 || steps[i] > 65536 || steps[i] % 4)
			usage();
	for (int i = 0; i < nt; i++)
		if (threads[i] < 1 || threads[i] > MAX_THREAD)
			usage();
	int fd = open(file, O_RDONLY | O_CLOEXEC), dfd = open(file, O_RDONLY | O_CLOEXEC | O_DIRECT);
	if (fd < 0 || fstat(fd, &st)) {
		fprintf(stderr, "copyfloor: %s: %s\n", file, strerror(errno));
		return 1;
	}
	size_t len = (size_t)(probe_mib ? probe_mib : mib) << 20;
	if ((off_t)len > st.st_size) {
		fprintf(stderr, "copyfloor: %s has %lld bytes, %zu MiB asked\n", file, (long long)st.st_size,
			len >> 20);
		return 1;
	}
	for (int i = 0; i < nk; i++)
		if (ks[i]->src == S_DIRECT && dfd < 0) {
			fprintf(stderr, "copyfloor: %s with O_DIRECT: %s\n", file, strerror(errno));
			return 1;
		}
	if (probe_mib)
		return probe(fd, dfd, len, ks, nk, (size_t)steps[0] << 10, reps ? reps : 2);

	struct {
		const struct kind *k;
		long step, threads;
	} cell[MAX_CELL];
	int nc = 0;
	for (int a = 0; a < nk; a++)
		for (int b = 0; b < ns; b++)
			for (int c = 0; c < nt && nc < MAX_CELL; c++, nc++) {
				cell[nc].k = ks[a];
				cell[nc].step = steps[b];
				cell[nc].threads = threads[c];
			}
	printf("kind\tstep_kib\tthreads\trep\tseconds\tgbps\tcpu_s\n");
	for (long r = 1; r <= (reps ? reps : 1); r++)
		for (int n = 0; n < nc; n++) {
			int i = r % 2 ? n : nc - 1 - n;
			double cpu,
			    t = one_run(cell[i].k, fd, dfd, len, (size_t)cell[i].step << 10, cell[i].threads, &cpu);

			if (t < 0)
				return 1;
			printf("%s\t%ld\t%ld\t%ld\t%.5f\t%.3f\t%.5f\n", cell[i].k->name, cell[i].step, cell[i].threads,
			       r, t, (double)len / t / 1e9, cpu);
			fflush(stdout);
		}
	return 0;
}

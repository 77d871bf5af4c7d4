// SPDX-License-Identifier: MIT
/*
 * uf-demand-file: the 2013 proposal's demo, re-done with libuserfault.
 *
 * A region (1 GiB by default) is armed with uf_madvise_userfault(); its
 * contents live in a file.  Touching a missing page raises SIGBUS; the
 * handler preads the chunk around it from the file into a staging buffer
 * and moves it into place with uf_remap_anon_pages().  The main loop then
 * reads every word of the region, which both triggers the faults and
 * verifies every byte against the pattern the file was written with.
 *
 * With -T the same region is served by uf_handler_thread() instead: a
 * thread preads each faulting page in its fill callback (UFFDIO_COPY).
 *
 *   uf-demand-file [-s MiB] [-c KiB] [-r] [-H] [-T] [-d DIR] [-x OFFSET]
 *     -s  region size in MiB (default 1024)
 *     -c  chunk fetched per fault in KiB, a power of two >= the page size
 *         (default 64)
 *     -r  touch the pages in a pseudo-random order instead of sequentially
 *     -H  MADV_HUGEPAGE on region and staging (with -c 2048: whole THPs move)
 *     -T  thread mode (one page per fault: -c must be the page size)
 *     -d  directory for the backing file (default $TMPDIR or /tmp)
 *     -x  flip one byte of the file at OFFSET after writing it, to show the
 *         verification catches a wrong byte (exits 1 naming it)
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "lib/userfault/userfault.h"

#define SEED	    0x5eed2013ULL
#define WRITE_BLOCK (1UL << 20)
#define HPAGE	    (2UL << 20)

struct opts {
	size_t size, chunk;
	bool random, huge, thread;
	const char *dir;
	size_t corrupt; /* with flip: byte of the file to flip */
	bool flip;
};

/* What the SIGBUS handler needs; set up before the first touch. */
static struct {
	char *base;
	size_t size, chunk;
	char *staging;
	int fd;
	unsigned long faults;
} g;

static uint64_t pattern(size_t off)
{
	return SEED ^ ((off / 8 + 1) * 0x9E3779B97F4A7C15ULL);
}

/* Only async-signal-safe calls below: write(2), _exit(2). */
static void die_in_handler(const char *what, const char *why)
{
	const char *parts[] = {"uf-demand-file: ", what, ": ", why, "\n"};
	size_t i;

	for (i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
		if (write(STDERR_FILENO, parts[i], strlen(parts[i])) < 0)
			break;
	_exit(1);
}

/* len bytes of the file at off, or -1 (errno; EIO for a short file) */
static int read_full(char *buf, size_t len, off_t off)
{
	size_t got = 0;

	while (got < len) {
		ssize_t r = pread(g.fd, buf + got, len - got, off + (off_t)got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r == 0)
				errno = EIO;
			return -1;
		}
		got += (size_t)r;
	}
	return 0;
}

static void fetch(char *chunk, size_t len)
{
	if (read_full(g.staging, len, chunk - g.base) < 0)
		die_in_handler("reading the backing file failed (short file or I/O error)", strerror(errno));
}

/* Thread mode: NULL makes the library poison the page (the toucher gets
 * SIGBUS) and say why on stderr. */
static const void *fill_page(void *page, void *buf, void *arg)
{
	g.faults++;
	return read_full(buf, (size_t)sysconf(_SC_PAGESIZE), (char *)page - g.base) < 0 ? NULL : buf;
}

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	char *addr = si->si_addr, *chunk;
	size_t len;

	if (addr < g.base || addr >= g.base + g.size) {
		signal(SIGBUS, SIG_DFL); /* not ours: let the re-fault kill us */
		return;
	}
	chunk = g.base + ((size_t)(addr - g.base) & ~(g.chunk - 1));
	len = g.chunk;
	if (chunk + len > g.base + g.size)
		len = (size_t)(g.base + g.size - chunk);
	fetch(chunk, len);
	if (uf_remap_anon_pages(chunk, g.staging, len) < 0)
		die_in_handler("remap failed", uf_last_error());
	g.faults++;
}

/* A decimal integer >= min, times unit, into *out. */
static int parse_num(const char *arg, const char *name, size_t unit, unsigned long long min, size_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(arg, &end, 10);
	if (errno || end == arg || *end || *arg == '-' || v < min || v > SIZE_MAX / unit) {
		fprintf(stderr, "uf-demand-file: bad %s '%s': want an integer >= %llu\n", name, arg, min);
		return -1;
	}
	*out = (size_t)v * unit;
	return 0;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);
	int c;

	*o = (struct opts){.size = 1024UL << 20, .chunk = 64UL << 10};
	o->dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	while ((c = getopt(argc, argv, "s:c:rHTd:x:")) != -1) {
		switch (c) {
		case 's':
			if (parse_num(optarg, "size (-s MiB)", 1UL << 20, 1, &o->size))
				return -1;
			break;
		case 'c':
			if (parse_num(optarg, "chunk (-c KiB)", 1UL << 10, 1, &o->chunk))
				return -1;
			break;
		case 'r':
			o->random = true;
			break;
		case 'H':
			o->huge = true;
			break;
		case 'T':
			o->thread = true;
			break;
		case 'd':
			o->dir = optarg;
			break;
		case 'x':
			if (parse_num(optarg, "offset (-x)", 1, 0, &o->corrupt))
				return -1;
			o->flip = true;
			break;
		default:
			fprintf(stderr,
				"usage: uf-demand-file [-s MiB] [-c KiB] [-r] [-H] [-T] [-d DIR] [-x OFFSET]\n");
			return -1;
		}
	}
	if (o->chunk < ps || (o->chunk & (o->chunk - 1)) || o->chunk > o->size) {
		fprintf(stderr, "uf-demand-file: bad chunk %zu KiB: want a power of two, >= %zu KiB, <= the size\n",
			o->chunk >> 10, ps >> 10);
		return -1;
	}
	if (o->thread && o->chunk != ps) {
		fprintf(stderr,
			"uf-demand-file: bad chunk %zu KiB for -T: thread mode serves one %zu KiB page per fault\n",
			o->chunk >> 10, ps >> 10);
		return -1;
	}
	if (o->flip && o->corrupt >= o->size) {
		fprintf(stderr, "uf-demand-file: -x %zu is past the end of the %zu-byte region\n", o->corrupt, o->size);
		return -1;
	}
	return 0;
}

static int write_backing(const struct opts *o, char *path, size_t path_len)
{
	uint64_t *block = malloc(WRITE_BLOCK);
	size_t off, i;
	int fd;

	snprintf(path, path_len, "%s/uf-demand-file-XXXXXX", o->dir);
	fd = block ? mkstemp(path) : -1;
	if (fd < 0) {
		fprintf(stderr, "uf-demand-file: cannot create backing file in %s: %s\n", o->dir, strerror(errno));
		free(block);
		return -1;
	}
	for (off = 0; off < o->size; off += WRITE_BLOCK) {
		size_t n = o->size - off < WRITE_BLOCK ? o->size - off : WRITE_BLOCK;

		for (i = 0; i < n / 8; i++)
			block[i] = pattern(off + i * 8);
		if (pwrite(fd, block, n, (off_t)off) != (ssize_t)n) {
			fprintf(stderr, "uf-demand-file: writing %s at offset %zu failed: %s\n", path, off,
				errno ? strerror(errno) : "short write");
			goto fail;
		}
	}
	if (o->flip) {
		unsigned char b;

		if (pread(fd, &b, 1, (off_t)o->corrupt) != 1 ||
		    (b ^= 0xff, pwrite(fd, &b, 1, (off_t)o->corrupt) != 1)) {
			fprintf(stderr, "uf-demand-file: cannot flip byte %zu of %s\n", o->corrupt, path);
			goto fail;
		}
	}
	free(block);
	return fd;
fail:
	free(block);
	close(fd);
	unlink(path);
	return -1;
}

static void *map_aligned(size_t len, size_t align, bool huge)
{
	size_t span = len + align;
	char *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	char *a;

	if (p == MAP_FAILED)
		return NULL;
	a = (char *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
	if (a > p && munmap(p, (size_t)(a - p)) < 0)
		return NULL;
	if (p + span > a + len && munmap(a + len, (size_t)(p + span - a - len)) < 0)
		return NULL;
	if (huge && madvise(a, len, MADV_HUGEPAGE) < 0)
		return NULL;
	return a;
}

/* Read every word; the first read of each chunk faults it in. */
static int verify(const struct opts *o)
{
	size_t ps = (size_t)sysconf(_SC_PAGESIZE), pages = o->size / ps, i, w;
	/* an odd stride is coprime to a power-of-two page count; else sequential */
	size_t stride = o->random && (pages & (pages - 1)) == 0 ? 2654435761UL % pages | 1 : 1;

	for (i = 0; i < pages; i++) {
		size_t pg = (i * stride) % pages;
		const volatile uint64_t *word = (const uint64_t *)(g.base + pg * ps);

		for (w = 0; w < ps / 8; w++) {
			size_t off = pg * ps + w * 8;
			uint64_t got = word[w], want = pattern(off);

			if (got != want) {
				fprintf(stderr,
					"uf-demand-file: FAIL: word at byte offset %zu is 0x%016" PRIx64
					", expected 0x%016" PRIx64 "\n",
					off, got, want);
				return -1;
			}
		}
	}
	return 0;
}

static double now(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Arm the region for SIGBUS mode, or start the handler thread (*h). */
static int arm(const struct opts *o, struct uf_handler **h)
{
	struct sigaction sa = {.sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO};

	if (o->thread)
		*h = uf_handler_thread(g.base, g.size, fill_page, NULL);
	if (o->thread ? !*h : uf_madvise_userfault(g.base, g.size) < 0) {
		fprintf(stderr, "uf-demand-file: %s\n", uf_last_error());
		return -1;
	}
	sigemptyset(&sa.sa_mask);
	if (!o->thread && sigaction(SIGBUS, &sa, NULL) < 0) {
		fprintf(stderr, "uf-demand-file: sigaction(SIGBUS): %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct uf_handler *h = NULL;
	char path[PATH_MAX];
	struct opts o;
	double t0, c0, t, c;
	int ret = 1;

	if (parse_opts(argc, argv, &o))
		return 2;
	g.fd = write_backing(&o, path, sizeof(path));
	if (g.fd < 0)
		return 1;
	g.size = o.size;
	g.chunk = o.chunk;
	g.base = map_aligned(o.size, o.chunk > HPAGE ? o.chunk : HPAGE, o.huge);
	g.staging = map_aligned(o.chunk, o.chunk, o.huge);
	if (!g.base || !g.staging) {
		fprintf(stderr, "uf-demand-file: cannot map %zu MiB: %s\n", o.size >> 20, strerror(errno));
		goto out;
	}
	if (arm(&o, &h) < 0)
		goto out;
	t0 = now(CLOCK_MONOTONIC);
	c0 = now(CLOCK_PROCESS_CPUTIME_ID);
	if (verify(&o) == 0) {
		t = now(CLOCK_MONOTONIC) - t0;
		c = now(CLOCK_PROCESS_CPUTIME_ID) - c0;
		printf("uf-demand-file: %zu MiB in %zu KiB chunks, %s order%s%s: %lu faults, all %zu bytes verified, "
		       "%.3f s (%.2f GB/s), CPU %.3f s\n",
		       o.size >> 20, o.chunk >> 10, o.random ? "random" : "sequential", o.huge ? ", THP" : "",
		       o.thread ? ", thread" : "", g.faults, o.size, t, (double)o.size / t / 1e9, c);
		ret = 0;
	}
	if (h && uf_handler_stop(h, NULL) < 0) {
		fprintf(stderr, "uf-demand-file: %s\n", uf_last_error());
		ret = 1;
	}
out:
	close(g.fd);
	unlink(path);
	return ret;
}

// SPDX-License-Identifier: MIT
/*
 * memhog: a dump target with known memory.
 *
 *   memhog -d DIR [-m MIB] [-f] [-t THREADS]
 *
 * Maps several VMAs and fills them with pattern_word(address, seed):
 *   big     -m MiB of anonymous memory, every page written
 *   holes   4 MiB, only even pages written (odd ones never touched: zero)
 *   ro      1 MiB, written then made read-only
 *   zeros   1 MiB, written with explicit zeros
 *   heap    256 KiB from malloc
 * With -f it forks a child that rewrites the first half of `big` with its own
 * seed (copy-on-write makes the two images differ).  -t starts threads that
 * just wait.  Each process writes DIR/manifest.<pid> (one line per region:
 * "start len seed kind") and then DIR/ready.<pid>.  On SIGUSR1 each process
 * checks every word of every region and writes DIR/result.<pid>: "OK pages"
 * or "BAD addr want got".  SIGTERM ends it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test/progs/pattern.h"
#include "test/progs/progs.h"

#define PAGE 4096UL

enum kind { K_PATTERN, K_HOLES, K_ZERO };

struct region {
	uint8_t *start;
	size_t len;
	uint64_t seed;
	enum kind kind;
	const char *name;
};

static struct region regions[8];
static int nr_regions;
static const char *dir;
static volatile sig_atomic_t check_requested, stop_requested;

static void fill_pattern(uint8_t *p, size_t len, uint64_t seed)
{
	for (size_t off = 0; off < len; off += 8)
		*(uint64_t *)(p + off) = pattern_word((uint64_t)(uintptr_t)(p + off), seed);
}

static void fill_region(struct region *r)
{
	switch (r->kind) {
	case K_PATTERN:
		fill_pattern(r->start, r->len, r->seed);
		break;
	case K_HOLES:
		for (size_t off = 0; off < r->len; off += 2 * PAGE)
			fill_pattern(r->start + off, PAGE, r->seed);
		break;
	case K_ZERO:
		memset(r->start, 0, r->len);
		break;
	}
}

static uint8_t *map_anon(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		prog_die("mmap");
	return p;
}

static void add_region(uint8_t *start, size_t len, uint64_t seed, enum kind kind, const char *name)
{
	struct region *r = &regions[nr_regions++];

	r->start = start;
	r->len = len;
	r->seed = seed;
	r->kind = kind;
	r->name = name;
	fill_region(r);
}

static void write_manifest(void)
{
	char buf[4096];
	size_t n = 0;

	for (int i = 0; i < nr_regions; i++)
		n += snprintf(buf + n, sizeof(buf) - n, "%lx %zu %lu %s\n", (unsigned long)regions[i].start,
			      regions[i].len, (unsigned long)regions[i].seed,
			      regions[i].kind == K_PATTERN ? "pattern"
			      : regions[i].kind == K_HOLES ? "holes"
							   : "zero");
	prog_write_file(dir, "manifest", buf);
	prog_write_file(dir, "ready", "ready\n");
}

/* Offset of the first wrong word in r, or -1; want and got describe it. */
static long check_region(const struct region *r, uint64_t *want, uint64_t *got)
{
	for (size_t off = 0; off < r->len; off += 8) {
		uint64_t addr = (uint64_t)(uintptr_t)(r->start + off);
		uint64_t w = pattern_word(addr, r->seed);

		if (r->kind == K_ZERO || (r->kind == K_HOLES && (off / PAGE) % 2))
			w = 0;
		if (*(volatile uint64_t *)(r->start + off) != w) {
			*want = w;
			*got = *(uint64_t *)(r->start + off);
			return off;
		}
	}
	return -1;
}

static void check_all(void)
{
	char buf[256];
	size_t pages = 0;

	for (int i = 0; i < nr_regions; i++) {
		uint64_t want, got;
		long off = check_region(&regions[i], &want, &got);

		if (off >= 0) {
			snprintf(buf, sizeof(buf), "BAD %s %p want %016lx got %016lx\n", regions[i].name,
				 regions[i].start + off, (unsigned long)want, (unsigned long)got);
			prog_write_file(dir, "result", buf);
			return;
		}
		pages += regions[i].len / PAGE;
	}
	snprintf(buf, sizeof(buf), "OK %zu\n", pages);
	prog_write_file(dir, "result", buf);
}

static void on_usr1(int sig)
{
	check_requested = 1;
}

static void on_term(int sig)
{
	stop_requested = 1;
}

static void *idle_thread(void *arg)
{
	for (;;)
		pause();
	return NULL;
}

/*
 * SIGUSR1/SIGTERM are blocked everywhere but in sigsuspend() here, so only this thread takes them.
 * A fork child tells its parent on tell_fd once its ready file is written, and the parent writes
 * its own only then: the harness waits for the parent's, and must see every process's.
 */
static void serve(const sigset_t *unblocked, int wait_fd, int tell_fd)
{
	char c = 1;

	if (wait_fd >= 0 && (read(wait_fd, &c, 1) != 1 || close(wait_fd)))
		prog_die("wait for the fork child");
	write_manifest();
	if (tell_fd >= 0 && (write(tell_fd, &c, 1) != 1 || close(tell_fd)))
		prog_die("tell the parent");
	while (!stop_requested) {
		if (check_requested) {
			check_requested = 0;
			check_all();
			continue;
		}
		sigsuspend(unblocked);
	}
}

int main(int argc, char **argv)
{
	size_t big_mib = 64;
	int opt, do_fork = 0, threads = 0;
	struct sigaction sa = {0};
	sigset_t block, unblocked;
	uint8_t *big;
	void *heap;

	while ((opt = getopt(argc, argv, "d:m:ft:")) != -1) {
		switch (opt) {
		case 'd':
			dir = optarg;
			break;
		case 'm':
			big_mib = strtoul(optarg, NULL, 0);
			break;
		case 'f':
			do_fork = 1;
			break;
		case 't':
			threads = atoi(optarg);
			break;
		default:
			fprintf(stderr, "usage: memhog -d DIR [-m MIB] [-f] [-t THREADS]\n");
			return 2;
		}
	}
	if (!dir || !big_mib) {
		fprintf(stderr, "usage: memhog -d DIR [-m MIB] [-f] [-t THREADS]\n");
		return 2;
	}
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	/* before any thread exists, so that the idle threads inherit the block */
	sigemptyset(&block);
	sigaddset(&block, SIGUSR1);
	sigaddset(&block, SIGTERM);
	sigprocmask(SIG_BLOCK, &block, &unblocked);

	big = map_anon(big_mib << 20);
	add_region(big, big_mib << 20, 1, K_PATTERN, "big");
	add_region(map_anon(4 << 20), 4 << 20, 2, K_HOLES, "holes");
	add_region(map_anon(1 << 20), 1 << 20, 3, K_PATTERN, "ro");
	if (mprotect(regions[nr_regions - 1].start, 1 << 20, PROT_READ))
		prog_die("mprotect");
	add_region(map_anon(1 << 20), 1 << 20, 0, K_ZERO, "zeros");
	/* page-aligned so that every region is made of whole pages */
	if (posix_memalign(&heap, PAGE, 256 << 10))
		prog_die("posix_memalign");
	add_region(heap, 256 << 10, 5, K_PATTERN, "heap");

	for (int i = 0; i < threads; i++) {
		pthread_t t;

		if (pthread_create(&t, NULL, idle_thread, NULL))
			prog_die("pthread_create");
	}
	int wait_fd = -1, tell_fd = -1;
	if (do_fork) {
		int p[2];
		pid_t pid;

		if (pipe(p))
			prog_die("pipe");
		pid = fork();
		if (pid < 0)
			prog_die("fork");
		if (pid == 0) {
			/* The child's copy of the first half of big differs from the parent's. */
			size_t half = (big_mib << 20) / 2;

			close(p[0]);
			tell_fd = p[1];
			regions[0].len = half;
			regions[0].seed = 100;
			fill_region(&regions[0]);
			regions[nr_regions++] = (struct region){big + half, half, 1, K_PATTERN, "big-upper"};
		} else {
			close(p[1]);
			wait_fd = p[0];
		}
	}
	serve(&unblocked, wait_fd, tell_fd);
	return 0;
}

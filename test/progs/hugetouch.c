// SPDX-License-Identifier: MIT
/*
 * hugetouch: a dump target with one MADV_HUGEPAGE region of known bytes.
 *
 *   hugetouch -d DIR [-m MIB] [-w PAGES] [-N] [-g]
 *
 * Maps MIB (default 64) MiB 2 MiB-aligned, madvise(MADV_HUGEPAGE) (not with
 * -N: for tests that count the minor faults of a read, which the collapse of
 * a huge page after a lazy restore causes too), fills it
 * with pattern_word(address, seed), then writes DIR/thp.<pid> ("before KIB":
 * the region's AnonHugePages from /proc/self/smaps, as the dump sees it) and
 * DIR/ready.<pid>.  Signals, after a restore:
 *   SIGUSR2  reads the first word of PAGES (-w, default 256) pages spread over
 *            the region in a fixed scattered order, each checked, and writes
 *            DIR/touched.<pid>: "OK pages N minflt M faulted I J ..." (minor
 *            faults the reads took: a page not installed yet costs at least
 *            one; then the page indices whose read faulted) or "BAD ...".
 *   SIGUSR1  checks every word and writes DIR/result.<pid>:
 *            "OK pages N AnonHugePages KIB kB" or "BAD addr want got".
 * With -g it also looks for DIR/go.<pid> every millisecond and, once there,
 * removes it and reads as on SIGUSR2: a test that makes the file before a
 * restore has the reads start within a millisecond of the program resuming,
 * before a fast prefetch can have installed every page.
 * SIGTERM ends it.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "test/progs/pattern.h"
#include "test/progs/progs.h"

#define PAGE	 4096UL
#define HUGE	 (2UL << 20)
#define SEED	 20
#define WS_PRIME 7919UL /* stride of the scattered order; prime, so every page is hit once */

static volatile sig_atomic_t check_requested, touch_requested, stop_requested;
static uint8_t *region;
static size_t region_len, ws_pages = 256;
static const char *dir;
static char go_path[256];

static void on_signal(int sig)
{
	if (sig == SIGUSR1)
		check_requested = 1;
	else if (sig == SIGUSR2)
		touch_requested = 1;
	else
		stop_requested = 1;
}

/* The region's AnonHugePages (kB) in /proc/self/smaps; -1 if not found. */
static long region_thp_kib(void)
{
	char line[512];
	unsigned long s, e;
	long kib = -1;
	int in = 0;
	FILE *f = fopen("/proc/self/smaps", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &s, &e) == 2) /* a VMA's first line */
			in = s == (unsigned long)(uintptr_t)region;
		else if (in && !strncmp(line, "AnonHugePages:", 14))
			kib = strtol(line + 14, NULL, 10);
	}
	fclose(f);
	return kib;
}

static long minflt(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_SELF, &ru) ? -1 : ru.ru_minflt;
}

static void touch(void)
{
	size_t n = region_len / PAGE, len = 0;
	static char buf[16384];
	char faulted[12288] = "";
	long total = 0;

	for (size_t i = 0; i < ws_pages && i < n; i++) {
		size_t page = i * WS_PRIME % n;
		uint64_t *w = (uint64_t *)(region + page * PAGE);
		uint64_t want = pattern_word((uint64_t)(uintptr_t)w, SEED);
		long before = minflt();
		uint64_t got = *(volatile uint64_t *)w;
		long took = minflt() - before;
		if (got != want) {
			snprintf(buf, sizeof(buf), "BAD %p want %016llx got %016llx", (void *)w,
				 (unsigned long long)want, (unsigned long long)got);
			prog_write_file(dir, "touched", buf);
			return;
		}
		total += took;
		if (took > 0 && len < sizeof(faulted) - 16)
			len += (size_t)snprintf(faulted + len, sizeof(faulted) - len, " %zu", page);
	}
	snprintf(buf, sizeof(buf), "OK pages %zu minflt %ld faulted%s", ws_pages < n ? ws_pages : n, total, faulted);
	prog_write_file(dir, "touched", buf);
}

static void check(void)
{
	char buf[160];

	for (size_t off = 0; off < region_len; off += 8) {
		uint64_t *w = (uint64_t *)(region + off), want = pattern_word((uint64_t)(uintptr_t)w, SEED);
		if (*w != want) {
			snprintf(buf, sizeof(buf), "BAD %p want %016llx got %016llx", (void *)w,
				 (unsigned long long)want, (unsigned long long)*w);
			prog_write_file(dir, "result", buf);
			return;
		}
	}
	snprintf(buf, sizeof(buf), "OK pages %zu AnonHugePages %ld kB", region_len / PAGE, region_thp_kib());
	prog_write_file(dir, "result", buf);
}

int main(int argc, char **argv)
{
	size_t mib = 64;
	char buf[64];
	int opt, huge = 1, go = 0;

	while ((opt = getopt(argc, argv, "d:m:w:Ng")) != -1) {
		if (opt == 'N')
			huge = 0;
		else if (opt == 'g')
			go = 1;
		else if (opt == 'd')
			dir = optarg;
		else if (opt == 'm')
			mib = strtoul(optarg, NULL, 10);
		else if (opt == 'w')
			ws_pages = strtoul(optarg, NULL, 10);
		else
			return 2;
	}
	if (!dir || !mib || mib % 2) {
		fprintf(stderr, "usage: hugetouch -d DIR [-m MIB (even)] [-w PAGES] [-N] [-g]\n");
		return 2;
	}
	region_len = mib << 20;
	uint8_t *raw = mmap(NULL, region_len + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		prog_die("mmap");
	region = (uint8_t *)(((uintptr_t)raw + HUGE - 1) & ~(HUGE - 1));
	/* trim to the aligned region: one VMA, its own smaps entry */
	if ((region > raw && munmap(raw, region - raw)) ||
	    munmap(region + region_len, raw + region_len + HUGE - (region + region_len)))
		prog_die("munmap");
	if (huge && madvise(region, region_len, MADV_HUGEPAGE))
		prog_die("madvise(MADV_HUGEPAGE)");
	for (size_t off = 0; off < region_len; off += 8)
		*(uint64_t *)(region + off) = pattern_word((uint64_t)(uintptr_t)(region + off), SEED);

	signal(SIGUSR1, on_signal);
	signal(SIGUSR2, on_signal);
	signal(SIGTERM, on_signal);
	snprintf(buf, sizeof(buf), "before %ld", region_thp_kib());
	prog_write_file(dir, "thp", buf);
	snprintf(go_path, sizeof(go_path), "%s/go.%d", dir, (int)getpid());
	prog_write_file(dir, "ready", "");
	while (!stop_requested) {
		if (go) {
			struct timespec ms = {0, 1000000};
			nanosleep(&ms, NULL);
			if (unlink(go_path) == 0)
				touch_requested = 1;
		} else {
			pause();
		}
		if (touch_requested) {
			touch_requested = 0;
			touch();
		}
		if (check_requested) {
			check_requested = 0;
			check();
		}
	}
	return 0;
}

// SPDX-License-Identifier: MIT
/*
 * touch: the benchmark's restored program.
 *
 *   touch -d DIR -m MIB [-n TOUCHES]
 *
 * Fills MIB of anonymous memory with distinct words, writes DIR/ready.<pid>
 * and waits for SIGUSR1, which the harness sends once it has been dumped and
 * `criu restore` has returned.  It then at once reads one word of each of
 * TOUCHES random pages (the first touches of a freshly restored program,
 * served on demand), timing each, then checks every word of the region, and
 * writes DIR/result.<pid>.  If DIR/idle exists when SIGUSR1 comes (an idle
 * program), it waits for SIGUSR2 between the touches and the check, which the
 * harness sends once the daemon has exited: the check then does not compete
 * with the page streaming.
 * The result file:
 *   "OK" or "BAD <addr>", then one line per touch with its latency in ns.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "test/progs/pattern.h"
#include "test/progs/progs.h"

#define PAGE	    4096UL
#define MAX_TOUCHES 100000

static uint64_t now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void write_result(const char *dir, const char *status, const uint64_t *lat, const unsigned char *missing, int n)
{
	char path[512], tmp[520];
	FILE *f;

	snprintf(path, sizeof(path), "%s/result.%d", dir, getpid());
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		exit(1);
	fprintf(f, "%s\n", status);
	for (int i = 0; i < n; i++)
		fprintf(f, "%llu %d\n", (unsigned long long)lat[i], missing[i] & 1 ? 0 : 1);
	if (fclose(f) || rename(tmp, path))
		exit(1);
}

int main(int argc, char **argv)
{
	static uint64_t lat[MAX_TOUCHES];
	static unsigned char resident[MAX_TOUCHES];
	const char *dir = NULL;
	size_t mib = 256, len, pages;
	int opt, touches = 1000, idle;
	char status[128] = "OK";
	uint64_t seed = 0x1234567;
	uint8_t *mem;

	while ((opt = getopt(argc, argv, "d:m:n:")) != -1) {
		switch (opt) {
		case 'd':
			dir = optarg;
			break;
		case 'm':
			mib = strtoul(optarg, NULL, 0);
			break;
		case 'n':
			touches = atoi(optarg);
			break;
		default:
			goto usage;
		}
	}
	if (!dir || !mib || touches < 0 || touches > MAX_TOUCHES)
		goto usage;
	len = mib << 20;
	pages = len / PAGE;
	mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		return 1;
	for (size_t off = 0; off < len; off += 8)
		*(uint64_t *)(mem + off) = pattern_word((uintptr_t)(mem + off), 7);
	/* The harness sends SIGUSR1 as soon as `criu restore` has returned. */
	{
		sigset_t set;
		int sig;

		sigemptyset(&set);
		sigaddset(&set, SIGUSR1);
		sigaddset(&set, SIGUSR2);
		sigprocmask(SIG_BLOCK, &set, NULL);
		prog_write_file(dir, "ready", "");
		do
			if (sigwait(&set, &sig))
				return 1;
		while (sig != SIGUSR1);
	}
	{
		char path[512];

		snprintf(path, sizeof(path), "%s/idle", dir);
		idle = access(path, F_OK) == 0;
	}

	/* Restored: touch random pages at once, then verify everything. */
	for (int i = 0; i < touches; i++) {
		size_t pg = xorshift(&seed) % pages;
		volatile uint64_t *w = (uint64_t *)(mem + pg * PAGE);
		uint64_t t0, v;

		if (mincore((void *)w, PAGE, &resident[i]))
			resident[i] = 1; /* unknown: do not count it as a fault */
		t0 = now_ns(CLOCK_MONOTONIC);
		v = *w;

		lat[i] = now_ns(CLOCK_MONOTONIC) - t0;
		if (v != pattern_word((uintptr_t)w, 7) && !strcmp(status, "OK"))
			snprintf(status, sizeof(status), "BAD %p", (void *)w);
	}
	if (idle) {
		sigset_t set;
		int sig;

		sigemptyset(&set);
		sigaddset(&set, SIGUSR2);
		if (sigwait(&set, &sig))
			return 1;
	}
	for (size_t off = 0; off < len && !strcmp(status, "OK"); off += 8)
		if (*(volatile uint64_t *)(mem + off) != pattern_word((uintptr_t)(mem + off), 7))
			snprintf(status, sizeof(status), "BAD %p", (void *)(mem + off));
	write_result(dir, status, lat, resident, touches);
	for (;;)
		pause();
usage:
	fprintf(stderr, "usage: touch -d DIR -m MIB [-n TOUCHES]\n");
	return 2;
}

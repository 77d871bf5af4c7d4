// SPDX-License-Identifier: MIT
/*
 * reader: the recorded program of bench/record-ws/run.sh.
 *
 *   reader -m MIB -H HOT_MIB -s SECONDS
 *
 * Maps MIB MiB (MADV_HUGEPAGE), writes every word with a pattern, prints
 * "ready", then for SECONDS reads one word of a pseudo-random page of the
 * first HOT_MIB MiB after another, printing "MS READS" every 100 ms (ms since
 * the loop started, reads in that tenth).  Then it checks every word and
 * prints "OK" or "BAD offset".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static uint64_t word(uint64_t off)
{
	return off * 0x9e3779b97f4a7c15ULL ^ 0x5bd1e995;
}

static double ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	size_t mib = 256, hot = 64;
	double secs = 8;
	int opt;

	while ((opt = getopt(argc, argv, "m:H:s:")) != -1) {
		if (opt == 'm')
			mib = strtoul(optarg, NULL, 10);
		else if (opt == 'H')
			hot = strtoul(optarg, NULL, 10);
		else if (opt == 's')
			secs = strtod(optarg, NULL);
		else
			return 2;
	}
	if (!mib || !hot || hot > mib)
		return 2;
	size_t len = mib << 20, pages = hot << 8;
	uint64_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 1;
	madvise(m, len, MADV_HUGEPAGE);
	for (size_t i = 0; i < len / 8; i++)
		m[i] = word(i);
	printf("ready\n");
	fflush(stdout);
	uint64_t x = 88172645463325252ULL, sum = 0, n = 0;
	double t0 = ms(), next = t0 + 100, end = t0 + secs * 1e3;
	for (;;) {
		for (int k = 0; k < 1024; k++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			sum += m[(x % pages) * 512 + (x >> 40) % 512];
		}
		n += 1024;
		double t = ms();
		if (t >= next) {
			printf("%.0f %llu\n", next - t0, (unsigned long long)n);
			fflush(stdout);
			n = 0;
			next += 100;
			if (next > end)
				break;
		}
	}
	for (size_t i = 0; i < len / 8; i++)
		if (m[i] != word(i)) {
			printf("BAD %zu\n", i * 8);
			return 1;
		}
	printf("OK %llu\n", (unsigned long long)(sum & 1));
	return 0;
}

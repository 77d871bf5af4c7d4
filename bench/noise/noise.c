// SPDX-License-Identifier: MIT
/*
 * How quiet the machine is right now: one busy thread pinned to each CPU
 * reads the clock in a loop for SECONDS; a gap between two reads is time
 * the thread did not run (the hypervisor, an interrupt, a kernel thread).
 * Printed with the steal time of the same interval (/proc/stat), so that a
 * benchmark's millisecond tails can be set against the host's own stalls.
 *   noise [SECONDS]   (default 3, at most 60)
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_CPUS 256

struct probe {
	int cpu;
	double secs;
	double longest;	 /* s */
	long over_100us; /* gaps longer than 100 us */
	long over_1ms;	 /* ... and than 1 ms */
	double stalled;	 /* s, sum of the gaps over 100 us */
	int err;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *run(void *arg)
{
	struct probe *p = arg;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(p->cpu, &set);
	p->err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	if (p->err)
		return NULL;
	double start = now(), last = start;
	for (;;) {
		double t = now(), gap = t - last;
		if (gap > p->longest)
			p->longest = gap;
		if (gap > 100e-6) {
			p->over_100us++;
			p->stalled += gap;
		}
		if (gap > 1e-3)
			p->over_1ms++;
		last = t;
		if (t - start >= p->secs)
			break;
	}
	return NULL;
}

/* Steal ticks of all CPUs, and all ticks, from /proc/stat's first line. */
static int read_steal(unsigned long long *steal, unsigned long long *total)
{
	unsigned long long v[8] = {0};
	FILE *f = fopen("/proc/stat", "r");

	if (!f)
		return -1;
	int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
		       &v[6], &v[7]);
	fclose(f);
	if (n != 8)
		return -1;
	*steal = v[7];
	*total = 0;
	for (int i = 0; i < 8; i++)
		*total += v[i];
	return 0;
}

int main(int argc, char **argv)
{
	double secs = 3;
	struct probe p[MAX_CPUS];
	pthread_t th[MAX_CPUS];
	cpu_set_t allowed;
	int n = 0;

	if (argc > 2 || (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))) {
		fprintf(stderr, "usage: noise [SECONDS]  (a busy thread per CPU; the longest gaps in its run)\n");
		return argc == 2 ? 0 : 2;
	}
	if (argc == 2) {
		char *end;
		errno = 0;
		secs = strtod(argv[1], &end);
		if (errno || *end || secs <= 0 || secs > 60) {
			fprintf(stderr, "noise: SECONDS: a number in (0, 60], not '%s'\n", argv[1]);
			return 2;
		}
	}
	if (sched_getaffinity(0, sizeof(allowed), &allowed)) {
		perror("noise: sched_getaffinity");
		return 1;
	}
	unsigned long long s0, t0, s1, t1;
	int stat_ok = read_steal(&s0, &t0) == 0;
	for (int cpu = 0; cpu < MAX_CPUS && cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &allowed))
			continue;
		p[n] = (struct probe){.cpu = cpu, .secs = secs};
		if (pthread_create(&th[n], NULL, run, &p[n])) {
			fprintf(stderr, "noise: can't start the thread for CPU %d\n", cpu);
			return 1;
		}
		n++;
	}
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	stat_ok = stat_ok && read_steal(&s1, &t1) == 0 && t1 > t0;

	double longest = 0, stalled = 0;
	long o100 = 0, o1 = 0;
	for (int i = 0; i < n; i++) {
		if (p[i].err) {
			fprintf(stderr, "noise: can't pin a thread to CPU %d: %s\n", p[i].cpu, strerror(p[i].err));
			return 1;
		}
		if (p[i].longest > longest)
			longest = p[i].longest;
		o100 += p[i].over_100us;
		o1 += p[i].over_1ms;
		stalled += p[i].stalled;
	}
	printf("host noise: %d CPUs busy for %.0f s each: longest stall %.2f ms, stalls > 1 ms: %ld, > 100 us: %ld "
	       "(%.1f%% of the time)",
	       n, secs, longest * 1e3, o1, o100, 100 * stalled / (secs * n));
	if (stat_ok)
		printf(", steal %.1f%%", 100.0 * (double)(s1 - s0) / (double)(t1 - t0));
	printf("\n");
	return 0;
}

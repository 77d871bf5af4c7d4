// SPDX-License-Identifier: MIT
/*
 * roundtrip: what a one-page userfault costs the faulting thread on this host
 * when nothing else runs, the floor under bench/restore's fault latencies.
 *
 *   roundtrip [-n FAULTS] [-s STRIDE_KIB] [-m poll|sleep] [-p] [-c same|other] [-i]
 *
 * A thread pinned to the first CPU reads one byte of FAULTS pages of a
 * registered anonymous region, STRIDE_KIB apart (default 8: many faults per
 * 2 MiB page table; 2048: every fault opens a region the thread never
 * touched), pausing 50 us every 8 faults as a program between requests.  A
 * server pinned to the second CPU answers each with a UFFDIO_COPY of one
 * page, polling the uffd (-m poll, the default: no wake-up of the server) or
 * sleeping in poll(2) between faults (-m sleep).  -p: before the faults, the
 * server installs the first page of every STRIDE window itself (the faults
 * then hit the second page), so the page tables exist before the thread
 * touches: whether a daemon could pay a first touch's cost in advance.
 * -c same: the server runs on the faulting thread's CPU (a hand-over between
 * two threads of one CPU, no cross-CPU wake-up); -i: a SCHED_IDLE thread spins
 * on the faulting thread's CPU, so that CPU never idles while the thread waits.
 * Prints the latency percentiles of the reads that faulted, in us, and the
 * pre-pass's cost per window.  Every page read is checked.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "lib/uffd-compat.h"

#define PAGE 4096UL

static int uffd, server_cpu = 1;
static bool sleeping;
static volatile int stop;
static uint8_t page[PAGE];

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void pin(int cpu)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	if (sched_setaffinity(0, sizeof(s), &s))
		fprintf(stderr, "roundtrip: can't pin to CPU %d: %s (figures include migrations)\n", cpu,
			strerror(errno));
}

static int copy_page(uint64_t dst)
{
	struct uffdio_copy c = {.dst = dst, .src = (uintptr_t)page, .len = PAGE};

	while (ioctl(uffd, UFFDIO_COPY, &c))
		if (errno != EINTR) {
			perror("roundtrip: UFFDIO_COPY");
			return -1;
		}
	return 0;
}

static void *server(void *arg)
{
	struct uffd_msg m;

	(void)arg;
	pin(server_cpu);
	while (!stop) {
		if (sleeping) {
			struct pollfd p = {.fd = uffd, .events = POLLIN};
			if (poll(&p, 1, 100) < 0 && errno != EINTR) {
				perror("roundtrip: poll");
				exit(1);
			}
		}
		ssize_t n = read(uffd, &m, sizeof(m));
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n != sizeof(m) || m.event != UFFD_EVENT_PAGEFAULT) {
			fprintf(stderr, "roundtrip: unexpected uffd read (%zd)\n", n);
			exit(1);
		}
		if (copy_page(m.arg.pagefault.address & ~(PAGE - 1)))
			exit(1);
	}
	return NULL;
}

/* Runs only when the faulting thread's CPU has nothing else to do. */
static void *spinner(void *arg)
{
	struct sched_param sp = {0};

	(void)arg;
	pin(0);
	if (sched_setscheduler(0, SCHED_IDLE, &sp))
		perror("roundtrip: SCHED_IDLE");
	while (!stop)
		__builtin_ia32_pause();
	return NULL;
}

int main(int argc, char **argv)
{
	size_t faults = 3000, stride = 8 << 10, off = 0;
	bool prepass = false, spin = false;
	int opt;

	while ((opt = getopt(argc, argv, "n:s:m:pc:i")) != -1) {
		switch (opt) {
		case 'n':
			faults = strtoul(optarg, NULL, 0);
			break;
		case 's':
			stride = strtoul(optarg, NULL, 0) << 10;
			break;
		case 'm':
			if (strcmp(optarg, "poll") && strcmp(optarg, "sleep"))
				goto usage;
			sleeping = !strcmp(optarg, "sleep");
			break;
		case 'p':
			prepass = true;
			break;
		case 'c':
			if (strcmp(optarg, "same") && strcmp(optarg, "other"))
				goto usage;
			server_cpu = !strcmp(optarg, "same") ? 0 : 1;
			break;
		case 'i':
			spin = true;
			break;
		default:
			goto usage;
		}
	}
	if (faults < 100 || faults > 100000 || stride < 2 * PAGE || stride > (64UL << 20) || stride % PAGE)
		goto usage;
	memset(page, 0x5a, sizeof(page));
	size_t len = faults * stride;
	uint8_t *mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t *lat = calloc(faults, sizeof(*lat));
	uffd = lr_uffd_new(O_CLOEXEC | O_NONBLOCK, 0);
	if (mem == MAP_FAILED || !lat || uffd < 0) {
		perror("roundtrip: setup");
		return 1;
	}
	madvise(mem, len, MADV_NOHUGEPAGE); /* 4 KiB faults: what UFFDIO_COPY installs */
	struct uffdio_register reg = {.range = {(uintptr_t)mem, len}, .mode = UFFDIO_REGISTER_MODE_MISSING};
	if (ioctl(uffd, UFFDIO_REGISTER, &reg)) {
		perror("roundtrip: UFFDIO_REGISTER");
		return 1;
	}
	if (prepass) {
		uint64_t t0 = now_ns();
		for (size_t i = 0; i < faults; i++)
			if (copy_page((uintptr_t)(mem + i * stride)))
				return 1;
		printf("pre-pass: %zu windows, %.1f us each\n", faults, (double)(now_ns() - t0) / 1e3 / (double)faults);
		off = PAGE;
	}
	pthread_t th, spin_th;
	if (pthread_create(&th, NULL, server, NULL) || (spin && pthread_create(&spin_th, NULL, spinner, NULL))) {
		fprintf(stderr, "roundtrip: can't start the server or spinner thread\n");
		return 1;
	}
	pin(0);
	usleep(20000);
	for (size_t i = 0; i < faults; i++) {
		volatile uint8_t *p = mem + i * stride + off;
		uint64_t t0 = now_ns();
		uint8_t v = *p;
		lat[i] = now_ns() - t0;
		if (v != 0x5a) {
			fprintf(stderr, "roundtrip: WRONG byte 0x%02x at page %zu\n", v, i);
			return 1;
		}
		if (i % 8 == 7)
			usleep(50);
	}
	stop = 1;
	pthread_join(th, NULL);
	if (spin)
		pthread_join(spin_th, NULL);
	qsort(lat, faults, sizeof(*lat), cmp_u64);
	printf("%zu faults, %zu KiB apart, server %s on the %s CPU%s%s: p50 %.1f p90 %.1f p99 %.1f p99.9 %.1f max %.1f "
	       "us\n",
	       faults, stride >> 10, sleeping ? "sleeping" : "polling", server_cpu ? "other" : "same",
	       spin ? ", an idle-time spinner on the faulting CPU" : "", prepass ? ", page tables made first" : "",
	       (double)lat[faults / 2] / 1e3, (double)lat[faults * 9 / 10] / 1e3, (double)lat[faults * 99 / 100] / 1e3,
	       (double)lat[faults * 999 / 1000] / 1e3, (double)lat[faults - 1] / 1e3);
	return 0;
usage:
	fprintf(stderr, "usage: roundtrip [-n FAULTS 100..100000] [-s STRIDE_KIB 8..65536] [-m poll|sleep] [-p] [-c "
			"same|other] [-i]\n");
	return 2;
}

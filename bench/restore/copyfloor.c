// SPDX-License-Identifier: MIT
/*
 * copyfloor: the fastest this machine brings a dump's pages in with
 * UFFDIO_COPY, with nothing else in the way (no faults, no hand-off, no
 * restored program), so the benchmark's "all resident" figures can be read
 * against what the kernel allows.
 *
 *   copyfloor -f PAGES_IMG -m MIB [-t THREADS] [-s STEP_KIB]
 *
 * Copies the first MIB of PAGES_IMG (mmap()ed, MADV_POPULATE_READ per 2 MiB
 * as the page server does) into a fresh uffd-registered anonymous region of
 * this process, THREADS threads (default 2) each taking 2 MiB chunks in turn,
 * STEP_KIB per UFFDIO_COPY (default 16, the page server's prefetch step).
 * Every page is then compared with the file.  Prints the wall-clock seconds.
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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/uffd-compat.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

#define CHUNK	   (2UL << 20)
#define MAX_THREAD 8

struct job {
	int uffd;
	const char *src;
	char *dst;
	size_t len, step;
	size_t next; /* next chunk, taken atomically */
	int failed;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int copy_chunk(struct job *j, size_t off)
{
	size_t end = off + CHUNK < j->len ? off + CHUNK : j->len;

	if (madvise((void *)(j->src + off), end - off, MADV_POPULATE_READ)) {
		perror("copyfloor: MADV_POPULATE_READ");
		return -1;
	}
	for (size_t o = off; o < end; o += j->step) {
		size_t l = end - o < j->step ? end - o : j->step;
		struct uffdio_copy c = {.dst = (uintptr_t)j->dst + o, .src = (uintptr_t)j->src + o, .len = l};

		while (ioctl(j->uffd, UFFDIO_COPY, &c)) {
			if (errno != EINTR && errno != EAGAIN) {
				perror("copyfloor: UFFDIO_COPY");
				return -1;
			}
			if (c.copy > 0) { /* partly done: go on after it */
				c.dst += (uint64_t)c.copy;
				c.src += (uint64_t)c.copy;
				c.len -= (uint64_t)c.copy;
			}
			c.copy = 0;
		}
	}
	return 0;
}

static void *copier(void *arg)
{
	struct job *j = arg;

	for (;;) {
		size_t off = __atomic_fetch_add(&j->next, CHUNK, __ATOMIC_RELAXED);
		if (off >= j->len || __atomic_load_n(&j->failed, __ATOMIC_RELAXED))
			return NULL;
		if (copy_chunk(j, off))
			__atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
	}
}

static int open_uffd(void)
{
	struct uffdio_api api = {.api = UFFD_API};
	int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC), fd;

	if (dev < 0) {
		perror("copyfloor: /dev/userfaultfd");
		return -1;
	}
	fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
	close(dev);
	if (fd < 0 || ioctl(fd, UFFDIO_API, &api)) {
		perror("copyfloor: userfaultfd");
		return -1;
	}
	return fd;
}

static void usage(void)
{
	fprintf(stderr, "usage: copyfloor -f PAGES_IMG -m MIB [-t THREADS (1..%d)] [-s STEP_KIB (4..2048)]\n",
		MAX_THREAD);
	exit(2);
}

int main(int argc, char **argv)
{
	const char *file = NULL;
	long mib = 0, threads = 2, step_kib = 16;
	pthread_t th[MAX_THREAD];
	struct stat st;
	int opt;

	while ((opt = getopt(argc, argv, "f:m:t:s:")) != -1) {
		switch (opt) {
		case 'f':
			file = optarg;
			break;
		case 'm':
			mib = strtol(optarg, NULL, 10);
			break;
		case 't':
			threads = strtol(optarg, NULL, 10);
			break;
		case 's':
			step_kib = strtol(optarg, NULL, 10);
			break;
		default:
			usage();
		}
	}
	if (!file || mib <= 0 || threads < 1 || threads > MAX_THREAD || step_kib < 4 || step_kib > 2048 || step_kib % 4)
		usage();
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		fprintf(stderr, "copyfloor: %s: %s\n", file, strerror(errno));
		return 1;
	}
	struct job j = {.len = (size_t)mib << 20, .step = (size_t)step_kib << 10};
	if ((off_t)j.len > st.st_size) {
		fprintf(stderr, "copyfloor: %s has %lld bytes, %ld MiB asked\n", file, (long long)st.st_size, mib);
		return 1;
	}
	j.src = mmap(NULL, j.len, PROT_READ, MAP_PRIVATE, fd, 0);
	j.dst = mmap(NULL, j.len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	j.uffd = open_uffd();
	if (j.src == MAP_FAILED || j.dst == MAP_FAILED || j.uffd < 0) {
		perror("copyfloor: mmap");
		return 1;
	}
	struct uffdio_register reg = {.range = {.start = (uintptr_t)j.dst, .len = j.len},
				      .mode = UFFDIO_REGISTER_MODE_MISSING};
	if (ioctl(j.uffd, UFFDIO_REGISTER, &reg)) {
		perror("copyfloor: UFFDIO_REGISTER");
		return 1;
	}
	double t0 = now();
	for (long i = 0; i < threads; i++)
		if (pthread_create(&th[i], NULL, copier, &j)) {
			fprintf(stderr, "copyfloor: can't start thread %ld\n", i);
			return 1;
		}
	for (long i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	double t = now() - t0;
	if (j.failed)
		return 1;
	if (memcmp(j.dst, j.src, j.len)) {
		fprintf(stderr, "copyfloor: copied pages differ from %s\n", file);
		return 1;
	}
	printf("%.4f\n", t);
	return 0;
}

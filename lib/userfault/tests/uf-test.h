/* SPDX-License-Identifier: MIT */
/* Helpers shared by libuserfault's cmocka tests (one binary per file). */
#ifndef LAZYRESTORE_UF_TEST_H
#define LAZYRESTORE_UF_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/userfault/userfault.h"

/*
 * ASan installs its own SIGBUS handler and would report a userfault as a
 * crash; the tests install theirs, so ASan must leave SIGBUS alone.
 */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "handle_sigbus=0";
}

#define PS    ((size_t)sysconf(_SC_PAGESIZE))
#define HPAGE (2UL << 20)

/* A fresh private anonymous mapping of len bytes aligned to align. */
static inline char *map_anon(size_t len, size_t align)
{
	size_t span = len + align;
	char *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uintptr_t a;

	assert_true(p != MAP_FAILED);
	a = ((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1);
	if (a > (uintptr_t)p)
		assert_int_equal(munmap(p, a - (uintptr_t)p), 0);
	if ((char *)p + span > (char *)a + len)
		assert_int_equal(munmap((char *)a + len, (uintptr_t)p + span - a - len), 0);
	return (char *)a;
}

/* pagemap bit 63 (present) or 62 (swapped) for one page */
static inline bool page_mapped(const void *addr)
{
	uint64_t ent = 0;
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &ent, sizeof(ent), (off_t)((uintptr_t)addr / PS * sizeof(ent))), sizeof(ent));
	close(fd);
	return ent & (3ULL << 62);
}

static inline size_t count_mapped(const char *addr, size_t len)
{
	size_t n = 0, off;

	for (off = 0; off < len; off += PS)
		n += page_mapped(addr + off);
	return n;
}

/* The bytes the tests expect at byte offset `off` of a range: never zero,
 * different for every word and every seed. */
static inline uint64_t pattern(uint64_t seed, size_t off)
{
	return (seed ^ ((off / 8 + 1) * 0x9E3779B97F4A7C15ULL)) | 1;
}

static inline void fill_pattern(void *buf, size_t len, uint64_t seed, size_t off)
{
	uint64_t *w = buf;
	size_t i;

	for (i = 0; i < len / 8; i++)
		w[i] = pattern(seed, off + i * 8);
}

/* Offset of the first word of [p, p+len) that differs, or len. */
static inline size_t check_pattern(const void *p, size_t len, uint64_t seed, size_t off)
{
	const volatile uint64_t *w = p;
	size_t i;

	for (i = 0; i < len / 8; i++)
		if (w[i] != pattern(seed, off + i * 8))
			return i * 8;
	return len;
}

/* AnonHugePages (kB) of the VMA that contains addr, from /proc/self/smaps. */
static inline long smaps_anon_huge_kb(const void *addr)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	char line[512];
	bool in = false;
	long kb = -1;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long s, e;

		if (sscanf(line, "%lx-%lx ", &s, &e) == 2 && strchr(line, '-') < strchr(line, ' ')) {
			in = (uintptr_t)addr >= s && (uintptr_t)addr < e;
			continue;
		}
		if (in && sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
			break;
	}
	fclose(f);
	return kb;
}

static inline void install_handler(int sig, void (*fn)(int, siginfo_t *, void *))
{
	struct sigaction sa = {.sa_sigaction = fn, .sa_flags = SA_SIGINFO | SA_NODEFER};

	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(sig, &sa, NULL), 0);
}

static inline void reset_handler(int sig)
{
	struct sigaction sa = {.sa_handler = SIG_DFL};

	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(sig, &sa, NULL), 0);
}

/* touch_sigbus(addr): 1 if reading addr raised SIGBUS (bus_addr and bus_code
 * then say where and why), 0 if the read completed.  The handler jumps out
 * of the fault, so a page nobody fills does not fault forever. */
static sigjmp_buf bus_jump;
static void *volatile bus_addr;
static volatile int bus_code;

static inline void bus_record_and_jump(int sig, siginfo_t *si, void *uc)
{
	bus_addr = si->si_addr;
	bus_code = si->si_code;
	siglongjmp(bus_jump, 1);
}

static inline int touch_sigbus(const volatile char *addr)
{
	int hit;

	install_handler(SIGBUS, bus_record_and_jump);
	bus_addr = NULL;
	bus_code = 0;
	hit = sigsetjmp(bus_jump, 1);
	if (!hit)
		(void)*addr;
	reset_handler(SIGBUS);
	return hit;
}

#endif

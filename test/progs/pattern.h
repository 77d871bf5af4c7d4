/* SPDX-License-Identifier: MIT */
/* The bytes test programs write: a function of the word's address and a seed, so every page differs. */
#ifndef LAZYRESTORE_TEST_PATTERN_H
#define LAZYRESTORE_TEST_PATTERN_H

#include <stdint.h>

static inline uint64_t pattern_word(uint64_t addr, uint64_t seed)
{
	uint64_t z = addr ^ (seed * 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return (z ^ (z >> 31)) | 1; /* never zero: a zero-filled page never passes */
}

#endif

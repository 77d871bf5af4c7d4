/* SPDX-License-Identifier: MIT */
/*
 * Framing of a fuzz_images input: a dump directory packed into one buffer.
 *
 * The input is a sequence of records, each
 *	u8 kind, u32 id, u32 len (little endian), then len bytes,
 * one record per file: kind picks the name (inventory.img, pstree.img,
 * core-<id>.img, mm-<id>.img, pagemap-<id>.img, pages-<id>.img) and the bytes
 * are its contents.  The reader never looks inside a pages file, only at its
 * size, so a pages record holds that size (u64 LE) instead of the data: the
 * corpus stays small and the fuzzer can still claim any size.  A truncated
 * record ends the input.
 */
#ifndef LAZYRESTORE_FUZZ_FRAME_H
#define LAZYRESTORE_FUZZ_FRAME_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum fz_kind {
	FZ_INVENTORY,
	FZ_PSTREE,
	FZ_CORE,
	FZ_MM,
	FZ_PAGEMAP,
	FZ_PAGES,
	FZ_NR_KINDS,
};

#define FZ_HDR_LEN     9
#define FZ_MAX_RECORDS 64
/* A pages file is made sparse with ftruncate; bound it below what tmpfs and mmap take. */
#define FZ_MAX_PAGES_SIZE (1ULL << 36)

struct fz_record {
	enum fz_kind kind;
	uint32_t id;
	const uint8_t *data;
	uint32_t len;
};

static inline uint32_t fz_get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t fz_pages_size(const struct fz_record *r)
{
	uint64_t v = 0;

	for (uint32_t i = 0; i < 8 && i < r->len; i++)
		v |= (uint64_t)r->data[i] << (8 * i);
	return v > FZ_MAX_PAGES_SIZE ? FZ_MAX_PAGES_SIZE : v;
}

/* Next record of buf[*pos..len): 1 and *r filled, or 0 at the end (or at a truncated record). */
static inline int fz_next(const uint8_t *buf, size_t len, size_t *pos, struct fz_record *r)
{
	uint32_t n;

	if (len - *pos < FZ_HDR_LEN)
		return 0;
	n = fz_get_u32(buf + *pos + 5);
	if (n > len - *pos - FZ_HDR_LEN)
		return 0;
	r->kind = buf[*pos] % FZ_NR_KINDS;
	r->id = fz_get_u32(buf + *pos + 1);
	r->data = buf + *pos + FZ_HDR_LEN;
	r->len = n;
	*pos += FZ_HDR_LEN + (size_t)n;
	return 1;
}

/* File name of a record, as the image library expects it. */
static inline void fz_name(const struct fz_record *r, char *name, size_t size)
{
	switch (r->kind) {
	case FZ_INVENTORY:
		snprintf(name, size, "inventory.img");
		break;
	case FZ_PSTREE:
		snprintf(name, size, "pstree.img");
		break;
	case FZ_CORE:
		snprintf(name, size, "core-%u.img", r->id);
		break;
	case FZ_MM:
		snprintf(name, size, "mm-%u.img", r->id);
		break;
	case FZ_PAGEMAP:
		snprintf(name, size, "pagemap-%u.img", r->id);
		break;
	default:
		snprintf(name, size, "pages-%u.img", r->id);
		break;
	}
}

#endif

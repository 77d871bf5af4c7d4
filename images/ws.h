/* SPDX-License-Identifier: MIT */
/*
 * The working-set file (lazyrestore-ws.img, next to the images): for each
 * task of one dump, the dump-time addresses of the pages a restore of it
 * faulted first, in first-fault order.  A later restore installs them before
 * anything else.  Our own format, not CRIU's; little-endian:
 *
 *   u32 common magic (if the dump's img_version is 2), u32 IMG_WS_MAGIC,
 *   then header:  u32 version, u32 nr_tasks, u64 ident, u64 total_pages,
 *                 u64 checksum (FNV-1a 64 of all bytes after the header)
 *   then per task, pids strictly ascending:
 *                 u32 pid (> 0), u32 nr_pages, nr_pages x u64 page address
 *
 * ident (img_ws_ident) hashes the dump's inventory.img and pstree.img, which
 * differ between any two dumps (dump_uptime), so a file left from another
 * dump, or copied from another one, is told apart.  Every size is bounded
 * and every error names the file, the offset and the problem.
 */
#ifndef LAZYRESTORE_IMAGES_WS_H
#define LAZYRESTORE_IMAGES_WS_H

#include <stddef.h>
#include <stdint.h>

#include "images/image.h"

#define IMG_WS_FILE	 "lazyrestore-ws.img"
#define IMG_WS_MAGIC	 0x5357524cU /* "LRWS" */
#define IMG_WS_VERSION	 1U
#define IMG_WS_HEADER	 32U /* bytes after the magic words */
#define IMG_WS_MAX_TASKS 4096U
#define IMG_WS_MAX_PAGES (1U << 18)   /* per task: 1 GiB of 4 KiB pages */
#define IMG_WS_MAX_TOTAL (1U << 22)   /* all tasks: 16 GiB, a 32 MiB file */
#define IMG_WS_MAX_ADDR	 (1ULL << 57) /* above any user address (5-level paging) */

struct img_ws_task {
	uint32_t pid;
	uint32_t nr;	 /* pages */
	uint64_t *pages; /* dump-time page addresses, first-fault order */
};

struct img_ws {
	uint64_t ident;
	size_t nr_tasks;
	struct img_ws_task *tasks; /* pids ascending */
};

/* The dump's identity: FNV-1a 64 of inventory.img and pstree.img. */
int img_ws_ident(struct img_dir *d, uint64_t *ident, struct img_err *err);

/*
 * Read DIR/IMG_WS_FILE.  Returns 0 with *ws filled, 1 if there is no such
 * file, -1 on a bad one (*err says why).  The caller compares ws->ident.
 */
int img_ws_read(struct img_dir *d, struct img_ws *ws, struct img_err *err);
/* Parse what follows the magic words; name is for errors, base the offset of buf in the file. */
int img_ws_parse(const uint8_t *buf, size_t len, const char *name, size_t base, struct img_ws *ws, struct img_err *err);
/* Write DIR/IMG_WS_FILE atomically (a temporary file renamed over it). */
int img_ws_write(struct img_dir *d, const struct img_ws *ws, struct img_err *err);
/*
 * The same format at any path (with the common magic; the reader takes it
 * with or without): a recording not yet keyed to a dump (ident 0).
 */
int img_ws_write_file(const char *path, const struct img_ws *ws, struct img_err *err);
int img_ws_read_file(const char *path, struct img_ws *ws, struct img_err *err);
/* Encode into a malloc()ed buffer (what follows the magic words). */
int img_ws_encode(const struct img_ws *ws, uint8_t **buf, size_t *len, struct img_err *err);
void img_ws_free(struct img_ws *ws);
const struct img_ws_task *img_ws_task(const struct img_ws *ws, uint32_t pid);

#endif

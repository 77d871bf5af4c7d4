// SPDX-License-Identifier: MIT
/* UFFDIO_COPY / ZEROPAGE / WAKE with every error return sorted out. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>

#include "lib/uffd-compat.h"
#include "plugin/engine/internal.h"
#include "plugin/log/log.h"

void lr_wake(struct lr_task *t, uint64_t addr, uint64_t len)
{
	struct uffdio_range r = {.start = addr, .len = len};

	while (ioctl(t->uffd, UFFDIO_WAKE, &r) && errno == EINTR)
		;
}

static void source_failed(struct lr_engine *e, struct lr_task *t, uint64_t dst, const char *why)
{
	char msg[700];

	snprintf(msg, sizeof(msg), "task %u (pid %d): page 0x%llx: %s", t->src_pid, t->real_pid,
		 (unsigned long long)dst, why);
	lr_engine_fail(e, msg);
}

int lr_source(struct lr_engine *e, struct lr_task *t, uint64_t dst, uint64_t img, uint64_t len, void *buf,
	      const void **data)
{
	char err[512];

	if (page_source_fetch(e->src, t->src_pid, img, len / PAGE, buf, data, err, sizeof(err))) {
		source_failed(e, t, dst, err);
		return INSTALL_FATAL;
	}
	return INSTALL_OK;
}

int lr_install(struct lr_engine *e, struct lr_task *t, uint64_t dst, uint64_t img, uint64_t len, uint64_t *done,
	       uint64_t *installed, bool *first_existed)
{
	const void *data;

	*done = 0;
	*installed = 0;
	if (lr_source(e, t, dst, img, len, e->fault_buf, &data))
		return INSTALL_FATAL;
	return lr_copy(e, t, dst, data, len, done, installed, first_existed);
}

int lr_copy(struct lr_engine *e, struct lr_task *t, uint64_t dst, const void *data, uint64_t len, uint64_t *done,
	    uint64_t *installed, bool *first_existed)
{
	return lr_copy_mode(e, t, dst, data, len, 0, done, installed, first_existed);
}

int lr_copy_mode(struct lr_engine *e, struct lr_task *t, uint64_t dst, const void *data, uint64_t len, uint64_t mode,
		 uint64_t *done, uint64_t *installed, bool *first_existed)
{
	char err[512];
	uint64_t off = 0, step = len;

	*done = 0;
	*installed = 0;
	if (first_existed)
		*first_existed = false;
	while (off < len) {
		uint64_t l = len - off < step ? len - off : step;
		struct uffdio_copy c = {.dst = dst + off, .src = (uintptr_t)data + off, .len = l, .mode = mode};

		if (!ioctl(t->uffd, UFFDIO_COPY, &c)) {
			off += l;
			*installed += l;
			continue;
		}
		int er = errno;
		uint64_t got = c.copy > 0 ? (uint64_t)c.copy : 0;
		off += got;
		*installed += got;
		switch (er) {
		case EINTR:
			continue;
		case EEXIST: /* someone installed it: skip that page */
			if (off == 0 && first_existed)
				*first_existed = true;
			__atomic_fetch_add(&e->stats.eexist, 1, __ATOMIC_RELAXED);
			off += PAGE;
			continue;
		case EAGAIN: /* the mm is changing: events first */
			*done = off;
			return INSTALL_AGAIN;
		case ENOENT: /* VMA split or gone: go page by page, skip unregistered ones */
			if (step == PAGE)
				off += PAGE;
			step = PAGE;
			continue;
		case ESRCH:
		case ENOSPC:
			*done = len;
			return INSTALL_GONE;
		case EFAULT:
			source_failed(e, t, dst + off, "image data unreadable (truncated file or I/O error)");
			return INSTALL_FATAL;
		default:
			snprintf(err, sizeof(err), "UFFDIO_COPY of %llu bytes failed: %s", (unsigned long long)l,
				 strerror(er));
			source_failed(e, t, dst + off, err);
			return INSTALL_FATAL;
		}
	}
	if (off > len)
		off = len;
	*done = off;
	__atomic_fetch_add(&e->stats.bytes, *installed, __ATOMIC_RELAXED);
	return INSTALL_OK;
}

int lr_zeropage(struct lr_engine *e, struct lr_task *t, uint64_t addr)
{
	for (;;) {
		struct uffdio_zeropage z = {.range = {.start = addr, .len = PAGE}};

		if (!ioctl(t->uffd, UFFDIO_ZEROPAGE, &z)) {
			__atomic_fetch_add(&e->stats.zero_pages, 1, __ATOMIC_RELAXED);
			return INSTALL_OK;
		}
		switch (errno) {
		case EINTR:
			continue;
		case EEXIST:
			__atomic_fetch_add(&e->stats.eexist, 1, __ATOMIC_RELAXED);
			lr_wake(t, addr, PAGE);
			return INSTALL_OK;
		case ENOENT: /* not registered any more: let the thread retry */
			lr_wake(t, addr, PAGE);
			return INSTALL_OK;
		case EAGAIN:
			return INSTALL_AGAIN;
		case ESRCH:
		case ENOSPC:
			return INSTALL_GONE;
		default:
			pr_perror("task %u: UFFDIO_ZEROPAGE at 0x%llx", t->src_pid, (unsigned long long)addr);
			return INSTALL_FATAL;
		}
	}
}

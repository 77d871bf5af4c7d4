/* SPDX-License-Identifier: MIT */
/* libuserfault internals: shared between the files of lib/userfault/. */
#ifndef LAZYRESTORE_USERFAULT_INTERNAL_H
#define LAZYRESTORE_USERFAULT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/uffd-compat.h"
#include "lib/userfault/userfault.h"

/* error.c: record "fn: what ADDR (ENAME)" for uf_last_error(), set errno,
 * return -1.  Async-signal-safe. */
int uf_fail(int err, const char *fn, const char *what, const void *addr);

/* uffd.c */
int uf_setup(void);	     /* page size, pagemap fd, once; 0 or -1 */
int uf_sigbus_fd(void);	     /* the process-wide SIGBUS uffd, opened once */
int uf_sigbus_fd_peek(void); /* the same if open, else -1; signal-safe */
int uf_open(const char *fn, __u64 features);
extern size_t uf_page_size;

static inline bool uf_aligned(uintptr_t v)
{
	return (v & (uf_page_size - 1)) == 0;
}

/* pagemap.c: bytes in the leading run of pages of [addr, addr+len) whose
 * state (present or swapped = mapped) equals `mapped`, or -1 with errno.
 * Async-signal-safe. */
ssize_t uf_run_length(const void *addr, size_t len, bool mapped);

/* maps.c: 0 if [addr, addr+len) is wholly private anonymous memory, else -1
 * (EINVAL, or ENOMEM for a hole) recorded under fn. */
int uf_check_anon_private(const char *fn, const void *addr, size_t len);

/* register.c: validate and register a range on fd in MISSING mode. */
int uf_arm(int fd, const char *fn, void *addr, size_t len);

#endif

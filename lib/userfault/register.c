// SPDX-License-Identifier: MIT
/*
 * Arming a range on a userfaultfd (MISSING mode), with the interface's
 * rules: private anonymous only, and nothing may be present yet.
 */
#include <errno.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include "lib/userfault/internal.h"

/* EBUSY if a page is there: it would never fault, silently. */
static int check_untouched(const char *fn, void *addr, size_t len)
{
	ssize_t run = uf_run_length(addr, len, false);

	if (run < 0)
		return uf_fail(errno, fn, "cannot read /proc/self/pagemap for", addr);
	if ((size_t)run < len)
		return uf_fail(EBUSY, fn, "page already present (register before touching)", (char *)addr + run);
	return 0;
}

static int check_args(const char *fn, void *addr, size_t len)
{
	if (!len || !uf_aligned((uintptr_t)addr) || !uf_aligned(len))
		return uf_fail(EINVAL, fn, "address or length not page-aligned (or length 0) at", addr);
	if ((uintptr_t)addr + len < (uintptr_t)addr)
		return uf_fail(EINVAL, fn, "range wraps around the address space at", addr);
	return 0;
}

int uf_arm(int fd, const char *fn, void *addr, size_t len)
{
	struct uffdio_register reg = {
	    .range = {.start = (uintptr_t)addr, .len = len},
	    .mode = UFFDIO_REGISTER_MODE_MISSING,
	};

	if (check_args(fn, addr, len) || uf_check_anon_private(fn, addr, len) || check_untouched(fn, addr, len))
		return -1;
	if (ioctl(fd, UFFDIO_REGISTER, &reg) < 0) {
		if (errno == EBUSY)
			return uf_fail(EBUSY, fn, "range is already armed on another userfaultfd at", addr);
		return uf_fail(errno, fn, "UFFDIO_REGISTER failed for", addr);
	}
	/* A page touched between the check and the registration is caught here. */
	if (check_untouched(fn, addr, len)) {
		/* If even this fails the range stays armed: its missing pages
		 * then raise SIGBUS, which is loud, not wrong. */
		if (ioctl(fd, UFFDIO_UNREGISTER, &reg.range) < 0)
			return uf_fail(EBUSY, fn, "page became present while arming; range left armed at", addr);
		errno = EBUSY;
		return -1;
	}
	if (madvise(addr, len, MADV_DONTFORK) < 0)
		return uf_fail(errno, fn, "madvise(MADV_DONTFORK) failed for", addr);
	return 0;
}

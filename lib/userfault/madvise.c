// SPDX-License-Identifier: MIT
/* uf_madvise_userfault() / uf_madvise_nouserfault(): SIGBUS mode. */
#include <errno.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include "lib/userfault/internal.h"

int uf_madvise_userfault(void *addr, size_t len)
{
	static const char fn[] = "uf_madvise_userfault";
	int fd;

	if (uf_setup() < 0)
		return -1;
	fd = uf_sigbus_fd();
	if (fd < 0)
		return -1;
	return uf_arm(fd, fn, addr, len);
}

int uf_madvise_nouserfault(void *addr, size_t len)
{
	static const char fn[] = "uf_madvise_nouserfault";
	struct uffdio_range range = {.start = (uintptr_t)addr, .len = len};
	int fd;

	if (uf_setup() < 0)
		return -1;
	fd = uf_sigbus_fd_peek();
	if (fd < 0)
		return uf_fail(EINVAL, fn, "no range was ever armed; nothing to disarm at", addr);
	if (!len || !uf_aligned(range.start) || !uf_aligned(len))
		return uf_fail(EINVAL, fn, "address or length not page-aligned (or length 0) at", addr);
	if (ioctl(fd, UFFDIO_UNREGISTER, &range) < 0)
		return uf_fail(errno, fn, "UFFDIO_UNREGISTER failed for", addr);
	if (madvise(addr, len, MADV_DOFORK) < 0)
		return uf_fail(errno, fn, "madvise(MADV_DOFORK) failed for", addr);
	return 0;
}

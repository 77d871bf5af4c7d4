/* SPDX-License-Identifier: MIT */
/*
 * userfaultfd definitions that Debian 12's linux-libc-dev (6.1) lacks but the
 * running kernel (6.18) implements.  Values are the kernel's uapi values
 * (include/uapi/linux/userfaultfd.h).  The one place the project defines them.
 */
#ifndef LAZYRESTORE_UFFD_COMPAT_H
#define LAZYRESTORE_UFFD_COMPAT_H

#include <errno.h>
#include <fcntl.h>
#include <linux/types.h>
#include <linux/userfaultfd.h>
#include <stdbool.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef UFFD_FEATURE_POISON
#define UFFD_FEATURE_POISON (1 << 14)
#endif
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15)
#endif
#ifndef UFFD_FEATURE_MOVE
#define UFFD_FEATURE_MOVE (1 << 16)
#endif

#ifndef _UFFDIO_MOVE
#define _UFFDIO_MOVE (0x05)
#endif
#ifndef _UFFDIO_POISON
#define _UFFDIO_POISON (0x08)
#endif

#ifndef UFFDIO_MOVE
struct uffdio_move {
	__u64 dst;
	__u64 src;
	__u64 len;
#define UFFDIO_MOVE_MODE_DONTWAKE	 ((__u64)1 << 0)
#define UFFDIO_MOVE_MODE_ALLOW_SRC_HOLES ((__u64)1 << 1)
	__u64 mode;
	__s64 move; /* bytes moved, or -errno */
};
#define UFFDIO_MOVE _IOWR(UFFDIO, _UFFDIO_MOVE, struct uffdio_move)
#endif

#ifndef UFFDIO_POISON
struct uffdio_poison {
	struct uffdio_range range;
#define UFFDIO_POISON_MODE_DONTWAKE ((__u64)1 << 0)
	__u64 mode;
	__s64 updated;
};
#define UFFDIO_POISON _IOWR(UFFDIO, _UFFDIO_POISON, struct uffdio_poison)
#endif

#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC	    0xAA
#define USERFAULTFD_IOC_NEW _IO(USERFAULTFD_IOC, 0x00)
#endif

static inline int lr_uffd_from_dev(int flags)
{
	int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC), fd, er;

	if (dev < 0)
		return -1;
	fd = ioctl(dev, USERFAULTFD_IOC_NEW, flags);
	er = errno;
	close(dev);
	errno = er;
	return fd;
}

/*
 * A new userfaultfd (flags: O_CLOEXEC, O_NONBLOCK) from the system call and
 * /dev/userfaultfd, the device first if dev_first.  The device works where the
 * call is refused (a seccomp filter, or vm.unprivileged_userfaultfd=0 for a
 * user without CAP_SYS_PTRACE).  *via_dev, if given, says which one answered.
 * -1 with errno set if neither did: the system call's reason.
 */
static inline int lr_uffd_open(int flags, bool dev_first, bool *via_dev)
{
	int fd = dev_first ? lr_uffd_from_dev(flags) : -1, er;

	if (via_dev)
		*via_dev = fd >= 0;
	if (fd >= 0)
		return fd;
	fd = (int)syscall(SYS_userfaultfd, flags);
	if (fd >= 0 || dev_first)
		return fd;
	er = errno;
	fd = lr_uffd_from_dev(flags);
	if (via_dev)
		*via_dev = fd >= 0;
	if (fd < 0)
		errno = er;
	return fd;
}

/* lr_uffd_open() (the system call first) and the UFFDIO_API handshake asking for features; -1 with errno set. */
static inline int lr_uffd_new(int flags, __u64 features)
{
	struct uffdio_api api = {.api = UFFD_API, .features = features};
	int fd = lr_uffd_open(flags, false, NULL), er;

	if (fd < 0)
		return -1;
	if (ioctl(fd, UFFDIO_API, &api) == 0)
		return fd;
	er = errno;
	close(fd);
	errno = er;
	return -1;
}

#endif

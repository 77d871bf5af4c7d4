// SPDX-License-Identifier: MIT
/*
 * Opening userfaultfds, and the one process-wide SIGBUS-mode uffd behind
 * uf_madvise_userfault() / uf_remap_anon_pages().
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/userfault/internal.h"

size_t uf_page_size;
int uf_pagemap_fd = -1;

static pthread_once_t setup_once = PTHREAD_ONCE_INIT;
static int setup_errno;
static pthread_mutex_t sigbus_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int sigbus_fd = -1;

static void open_pagemap(void)
{
	uf_pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	setup_errno = uf_pagemap_fd < 0 ? errno : 0;
}

/*
 * A child must not use its parent's uffd (it registers ranges of the
 * parent's mm) nor its pagemap (it describes the parent's pages).  Armed
 * ranges are not in the child (MADV_DONTFORK), so it starts afresh.
 */
static void reset_after_fork(void)
{
	int fd = atomic_exchange(&sigbus_fd, -1);

	if (fd >= 0)
		close(fd);
	if (uf_pagemap_fd >= 0)
		close(uf_pagemap_fd);
	open_pagemap();
}

static void setup(void)
{
	long ps = sysconf(_SC_PAGESIZE);
	int err;

	if (ps <= 0) {
		setup_errno = EINVAL;
		return;
	}
	uf_page_size = (size_t)ps;
	open_pagemap();
	err = pthread_atfork(NULL, NULL, reset_after_fork);
	if (err && !setup_errno)
		setup_errno = err;
}

int uf_setup(void)
{
	int err = pthread_once(&setup_once, setup);

	if (err)
		return uf_fail(err, "libuserfault", "pthread_once failed", NULL);
	if (setup_errno)
		return uf_fail(setup_errno, "libuserfault", "cannot open /proc/self/pagemap", NULL);
	return 0;
}

/*
 * /dev/userfaultfd first: it is the kernel's way for a process that may not
 * use the syscall (vm.unprivileged_userfaultfd = 0, user namespaces).
 */
int uf_open(const char *fn, __u64 features)
{
	struct uffdio_api api = {.api = UFFD_API, .features = features};
	int fd = lr_uffd_open(O_CLOEXEC | O_NONBLOCK, true, NULL);

	if (fd < 0)
		return uf_fail(errno, fn, "cannot open a userfaultfd (neither /dev/userfaultfd nor the syscall)", NULL);
	if (ioctl(fd, UFFDIO_API, &api) < 0) {
		int err = errno;

		close(fd);
		return uf_fail(err, fn, "UFFDIO_API refused the features this library needs", NULL);
	}
	if ((api.features & features) != features) {
		close(fd);
		return uf_fail(EOPNOTSUPP, fn, "kernel lacks a needed userfaultfd feature", NULL);
	}
	return fd;
}

int uf_sigbus_fd(void)
{
	int fd = atomic_load(&sigbus_fd);

	if (fd >= 0)
		return fd;
	pthread_mutex_lock(&sigbus_lock);
	fd = atomic_load(&sigbus_fd);
	if (fd < 0) {
		fd = uf_open("uf_madvise_userfault", UFFD_FEATURE_SIGBUS | UFFD_FEATURE_MOVE);
		if (fd >= 0)
			atomic_store(&sigbus_fd, fd);
	}
	pthread_mutex_unlock(&sigbus_lock);
	return fd;
}

/* For the signal path: no lock, no opening. */
int uf_sigbus_fd_peek(void)
{
	return atomic_load(&sigbus_fd);
}

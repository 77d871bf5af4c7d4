// SPDX-License-Identifier: MIT
/*
 * Thread mode: a private uffd (no SIGBUS feature, so faults become messages)
 * and a thread that reads them, asks the user's fill callback for the bytes
 * and installs them with UFFDIO_COPY.  A page that cannot be had is
 * poisoned: the toucher gets SIGBUS, never wrong bytes.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/userfault/internal.h"

#define MSG_BATCH    16
#define COPY_RETRIES 1000

struct uf_handler {
	int uffd;
	int stopfd;
	pthread_t tid;
	char *addr;
	size_t len;
	uf_fill_fn fill;
	void *arg;
	void *buf;
	struct uf_handler_stats st;
};

static void warn(const char *what, uintptr_t page, int err)
{
	fprintf(stderr, "libuserfault: handler: %s page 0x%lx: %s; poisoning it (touch raises SIGBUS)\n", what,
		(unsigned long)page, strerror(err));
}

static int poison(struct uf_handler *h, uintptr_t start, size_t len)
{
	struct uffdio_poison p = {.range = {.start = start, .len = len}};

	while (ioctl(h->uffd, UFFDIO_POISON, &p) < 0) {
		if (errno != EAGAIN && errno != EINTR)
			return -1;
		if (p.updated > 0) {
			p.range.start += (__u64)p.updated;
			p.range.len -= (__u64)p.updated;
		}
	}
	return 0;
}

static void poison_page(struct uf_handler *h, uintptr_t page)
{
	h->st.poisoned++;
	if (poison(h, page, uf_page_size) < 0 && errno != EEXIST)
		fprintf(stderr, "libuserfault: handler: cannot poison page 0x%lx: %s\n", (unsigned long)page,
			strerror(errno));
}

/* Someone filled it first: the faulting thread may still wait on us. */
static void wake(struct uf_handler *h, uintptr_t page)
{
	struct uffdio_range r = {.start = page, .len = uf_page_size};

	if (ioctl(h->uffd, UFFDIO_WAKE, &r) < 0 && errno != ENOENT)
		fprintf(stderr, "libuserfault: handler: UFFDIO_WAKE 0x%lx: %s\n", (unsigned long)page, strerror(errno));
}

static void serve(struct uf_handler *h, uintptr_t page)
{
	struct uffdio_copy c = {.dst = page, .len = uf_page_size};
	const void *src;
	int tries = 0;

	errno = 0;
	src = h->fill((void *)page, h->buf, h->arg);
	if (!src) {
		warn("fill callback failed for", page, errno ? errno : EIO);
		poison_page(h, page);
		return;
	}
	c.src = (uintptr_t)src;
	while (ioctl(h->uffd, UFFDIO_COPY, &c) < 0) {
		if ((errno == EAGAIN || errno == EINTR) && ++tries < COPY_RETRIES) {
			sched_yield();
			continue;
		}
		if (errno == EEXIST) {
			h->st.raced++;
			wake(h, page);
		} else if (errno != ENOENT && errno != ESRCH) {
			/* ENOENT/ESRCH: range unmapped or mm gone, nobody waits */
			warn("UFFDIO_COPY failed for", page, errno);
			poison_page(h, page);
		}
		return;
	}
	h->st.copies++;
}

/* 1: stop asked, 0: messages handled, -1: fatal uffd error */
static int handle_batch(struct uf_handler *h)
{
	struct pollfd pfd[2] = {{.fd = h->uffd, .events = POLLIN}, {.fd = h->stopfd, .events = POLLIN}};
	struct uffd_msg msg[MSG_BATCH];
	ssize_t n, i;

	if (poll(pfd, 2, -1) < 0)
		return errno == EINTR ? 0 : -1;
	if (pfd[1].revents)
		return 1;
	if (pfd[0].revents & (POLLERR | POLLHUP))
		return -1;
	n = read(h->uffd, msg, sizeof(msg));
	if (n < 0)
		return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
	for (i = 0; i < n / (ssize_t)sizeof(msg[0]); i++) {
		if (msg[i].event != UFFD_EVENT_PAGEFAULT)
			continue; /* no other events were asked for */
		h->st.faults++;
		serve(h, (uintptr_t)msg[i].arg.pagefault.address & ~(uintptr_t)(uf_page_size - 1));
	}
	return 0;
}

static void *handler_main(void *p)
{
	struct uf_handler *h = p;
	int r;

	while ((r = handle_batch(h)) == 0)
		;
	if (r < 0)
		fprintf(stderr, "libuserfault: handler for 0x%lx: reading the userfaultfd failed: %s\n",
			(unsigned long)h->addr, strerror(errno));
	return NULL;
}

static void destroy(struct uf_handler *h)
{
	if (h->buf && munmap(h->buf, uf_page_size) < 0)
		fprintf(stderr, "libuserfault: handler: munmap of its page buffer: %s\n", strerror(errno));
	if (h->stopfd >= 0)
		close(h->stopfd);
	if (h->uffd >= 0)
		close(h->uffd);
	free(h);
}

struct uf_handler *uf_handler_thread(void *addr, size_t len, uf_fill_fn fill, void *arg)
{
	static const char fn[] = "uf_handler_thread";
	struct uf_handler *h;
	int err;

	if (uf_setup() < 0)
		return NULL;
	if (!fill) {
		uf_fail(EINVAL, fn, "no fill callback for", addr);
		return NULL;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		uf_fail(ENOMEM, fn, "out of memory for", addr);
		return NULL;
	}
	*h = (struct uf_handler){.uffd = -1, .stopfd = -1, .addr = addr, .len = len, .fill = fill, .arg = arg};
	h->buf = mmap(NULL, uf_page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (h->buf == MAP_FAILED) {
		h->buf = NULL;
		uf_fail(errno, fn, "cannot map a page buffer for", addr);
		goto fail;
	}
	h->stopfd = eventfd(0, EFD_CLOEXEC);
	if (h->stopfd < 0) {
		uf_fail(errno, fn, "eventfd failed for", addr);
		goto fail;
	}
	h->uffd = uf_open(fn, UFFD_FEATURE_POISON);
	if (h->uffd < 0 || uf_arm(h->uffd, fn, addr, len) < 0)
		goto fail;
	err = pthread_create(&h->tid, NULL, handler_main, h);
	if (err) {
		uf_fail(err, fn, "pthread_create failed for", addr);
		goto fail;
	}
	return h;
fail:
	err = errno;
	destroy(h); /* closing the uffd disarms a range armed above */
	errno = err;
	return NULL;
}

/* Poison what was never filled, so that closing the uffd (which disarms the
 * range) cannot let a later touch read zeros.  A hole (unmapped) is skipped. */
static void poison_missing(struct uf_handler *h)
{
	size_t off = 0;

	while (off < h->len) {
		ssize_t run = uf_run_length(h->addr + off, h->len - off, true);

		if (run < 0)
			break;
		off += (size_t)run;
		run = uf_run_length(h->addr + off, h->len - off, false);
		if (run <= 0)
			break;
		if (poison(h, (uintptr_t)h->addr + off, (size_t)run) < 0 && errno != ENOENT && errno != EINVAL)
			fprintf(stderr, "libuserfault: handler: cannot poison unfilled pages at %p: %s\n",
				(void *)(h->addr + off), strerror(errno));
		off += (size_t)run;
	}
}

int uf_handler_stop(struct uf_handler *h, struct uf_handler_stats *stats)
{
	static const char fn[] = "uf_handler_stop";
	uint64_t one = 1;
	int err;

	if (!h)
		return uf_fail(EINVAL, fn, "no handler", NULL);
	if (write(h->stopfd, &one, sizeof(one)) != sizeof(one))
		return uf_fail(errno, fn, "cannot signal the handler thread of", h->addr);
	err = pthread_join(h->tid, NULL);
	if (err)
		return uf_fail(err, fn, "pthread_join failed for", h->addr);
	poison_missing(h);
	if (stats)
		*stats = h->st;
	destroy(h);
	return 0;
}

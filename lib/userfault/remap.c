// SPDX-License-Identifier: MIT
/*
 * uf_remap_anon_pages(): remap_anon_pages() of the 2013 proposal, as
 * UFFDIO_MOVE.  Called from SIGBUS handlers, so async-signal-safe: no
 * allocation, no lock, pread and ioctl only.
 */
#include <errno.h>
#include <sched.h>
#include <sys/ioctl.h>

#include "lib/userfault/internal.h"

#define MOVE_RETRIES 1000 /* EAGAIN: page briefly pinned or migrating */

static const char fn[] = "uf_remap_anon_pages";

/*
 * The kernel checks dst/src page by page as it moves, so a bad page in the
 * middle would leave the move half done.  Checking first makes the call all
 * or nothing.  One page needs no pre-check: the kernel's own is atomic.
 */
static int check_ranges(char *dst, char *src, size_t len)
{
	ssize_t run;

	if (len == uf_page_size)
		return 0;
	run = uf_run_length(dst, len, false);
	if (run < 0)
		return uf_fail(errno, fn, "cannot read /proc/self/pagemap for", dst);
	if ((size_t)run < len)
		return uf_fail(EEXIST, fn, "dst page is already present", dst + run);
	run = uf_run_length(src, len, true);
	if (run < 0)
		return uf_fail(errno, fn, "cannot read /proc/self/pagemap for", src);
	if ((size_t)run < len)
		return uf_fail(ENOENT, fn, "src page is missing", src + run);
	return 0;
}

static int move_error(int err, char *dst, char *src, size_t done)
{
	switch (err) {
	case EEXIST:
		return uf_fail(err, fn, done ? "dst page became present mid-move" : "dst page is already present",
			       dst + done);
	case ENOENT:
		return uf_fail(err, fn, "src page missing or a range not mapped", src + done);
	case EINVAL:
		return uf_fail(err, fn, "kernel refused: dst not armed, or src/dst differ in protection or mlock",
			       dst + done);
	case EBUSY:
		return uf_fail(err, fn, "src page is shared (fork, KSM) or pinned; cannot move", src + done);
	default:
		return uf_fail(err, fn, "UFFDIO_MOVE failed at dst", dst + done);
	}
}

int uf_remap_anon_pages(void *dst, void *src, size_t len)
{
	uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
	int fd = uf_sigbus_fd_peek();
	size_t done = 0;
	int tries = 0;

	if (fd < 0)
		return uf_fail(EINVAL, fn, "no range was armed with uf_madvise_userfault(); dst", dst);
	if (!len || !uf_aligned(d) || !uf_aligned(s) || !uf_aligned(len))
		return uf_fail(EINVAL, fn, "dst, src or len not page-aligned (or len 0); dst", dst);
	if (d + len < d || s + len < s || (d < s + len && s < d + len))
		return uf_fail(EINVAL, fn, "src and dst overlap or wrap; dst", dst);
	if (check_ranges(dst, src, len))
		return -1;
	while (done < len) {
		struct uffdio_move mv = {.dst = d + done, .src = s + done, .len = len - done};

		if (ioctl(fd, UFFDIO_MOVE, &mv) == 0)
			return 0;
		if (mv.move > 0) { /* partial: go on with the rest */
			done += (size_t)mv.move;
			continue;
		}
		if ((errno == EAGAIN || errno == EINTR) && ++tries < MOVE_RETRIES) {
			sched_yield();
			continue;
		}
		return move_error(errno, dst, src, done);
	}
	return 0;
}

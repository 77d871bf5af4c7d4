// SPDX-License-Identifier: MIT
/* uf_madvise_userfault(): its rules, its errnos, and SIGBUS delivery. */
#include <sys/wait.h>

#include "lib/userfault/tests/uf-test.h"

static volatile sig_atomic_t got_sigbus;
static void *volatile got_addr;

/* Fills the page from a staging page and lets the access complete. */
static char *staging;
static uint64_t fill_seed;
static char *fill_base;

static char *volatile handler_stack; /* where the handler's frame was */

static void fill_and_return(int sig, siginfo_t *si, void *uc)
{
	char *page = (char *)((uintptr_t)si->si_addr & ~(PS - 1));
	char here;

	handler_stack = &here;
	got_sigbus++;
	got_addr = si->si_addr;
	fill_pattern(staging, PS, fill_seed, (size_t)(page - fill_base));
	if (uf_remap_anon_pages(page, staging, PS) < 0)
		abort();
}

static void expect_fail(int ret, int err)
{
	assert_int_equal(ret, -1);
	assert_int_equal(errno, err);
	assert_true(strlen(uf_last_error()) > 0);
}

static void test_unaligned(void **state)
{
	char *p = map_anon(4 * PS, PS);

	expect_fail(uf_madvise_userfault(p + 1, PS), EINVAL);
	expect_fail(uf_madvise_userfault(p, PS + 1), EINVAL);
	expect_fail(uf_madvise_userfault(p, 0), EINVAL);
	assert_non_null(strstr(uf_last_error(), "uf_madvise_userfault"));
	munmap(p, 4 * PS);
}

static void test_file_backed_private(void **state)
{
	char path[] = "/tmp/uf-test-XXXXXX";
	int fd = mkstemp(path);
	char *p;

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)(4 * PS)), 0);
	p = mmap(NULL, 4 * PS, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	assert_true(p != MAP_FAILED);
	expect_fail(uf_madvise_userfault(p, 4 * PS), EINVAL);
	assert_non_null(strstr(uf_last_error(), "not private anonymous"));
	munmap(p, 4 * PS);
	close(fd);
	unlink(path);
}

static void test_shared_anon(void **state)
{
	char *p = mmap(NULL, 4 * PS, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	assert_true(p != MAP_FAILED);
	expect_fail(uf_madvise_userfault(p, 4 * PS), EINVAL);
	munmap(p, 4 * PS);
}

/* A range that is private anonymous only in part is refused as a whole. */
static void test_mixed_range(void **state)
{
	char *p = map_anon(4 * PS, PS);
	char *q = mmap(p + 2 * PS, 2 * PS, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0);

	assert_true(q == p + 2 * PS);
	expect_fail(uf_madvise_userfault(p, 4 * PS), EINVAL);
	munmap(p, 4 * PS);
}

static void test_stack(void **state)
{
	char here;
	char *page = (char *)((uintptr_t)&here & ~(PS - 1));

	expect_fail(uf_madvise_userfault(page, PS), EINVAL);
}

static void test_hole(void **state)
{
	char *p = map_anon(4 * PS, PS);

	assert_int_equal(munmap(p + PS, PS), 0);
	expect_fail(uf_madvise_userfault(p, 4 * PS), ENOMEM);
	assert_non_null(strstr(uf_last_error(), "hole"));
	munmap(p, 4 * PS);
}

/* A written page and a read one (zero page) are both "present". */
static void test_touched_is_ebusy(void **state)
{
	char *p = map_anon(8 * PS, PS);
	char addr[32];

	p[5 * PS] = 1;
	expect_fail(uf_madvise_userfault(p, 8 * PS), EBUSY);
	snprintf(addr, sizeof(addr), "%p", (void *)(p + 5 * PS));
	assert_non_null(strstr(uf_last_error(), addr));
	munmap(p, 8 * PS);

	p = map_anon(8 * PS, PS);
	assert_int_equal(((volatile char *)p)[3 * PS], 0);
	expect_fail(uf_madvise_userfault(p, 8 * PS), EBUSY);
	/* the untouched part alone is fine */
	assert_int_equal(uf_madvise_userfault(p + 4 * PS, 4 * PS), 0);
	munmap(p, 8 * PS);
}

/* Every page of the range raises SIGBUS, at the exact address touched. */
static void test_sigbus_si_addr(void **state)
{
	const size_t n = 8;
	char *p = map_anon(n * PS, PS);
	size_t i;

	assert_int_equal(uf_madvise_userfault(p, n * PS), 0);
	for (i = 0; i < n; i++) {
		volatile char *target = p + i * PS + 8 * i + 3;

		assert_int_equal(touch_sigbus(target), 1);
		assert_ptr_equal(bus_addr, (void *)target);
		assert_int_equal(bus_code, BUS_ADRERR);
		assert_false(page_mapped(p + i * PS));
	}
	munmap(p, n * PS);
}

/* The proposal's loop: fault, handler remaps a filled page, access completes. */
static void sigbus_fill(int flags)
{
	struct sigaction sa = {.sa_sigaction = fill_and_return, .sa_flags = SA_SIGINFO | flags};
	const size_t n = 64;
	char *p = map_anon(n * PS, PS);
	size_t i;

	staging = map_anon(PS, PS);
	fill_seed = 0x1234;
	fill_base = p;
	assert_int_equal(uf_madvise_userfault(p, n * PS), 0);
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGBUS, &sa, NULL), 0);
	got_sigbus = 0;
	for (i = 0; i < n; i++) /* odd order: from the end, writes and reads */
		if (i % 2)
			assert_int_equal(check_pattern(p + (n - 1 - i) * PS, PS, fill_seed, (n - 1 - i) * PS), PS);
		else
			((volatile char *)p)[(n - 1 - i) * PS + 17] = 0x5a;
	assert_int_equal(got_sigbus, n);
	for (i = 0; i < n; i += 2) { /* the write landed on the filled page */
		size_t off = (n - 1 - i) * PS;
		uint64_t w = pattern(fill_seed, off + 16);

		assert_int_equal(p[off + 17], 0x5a);
		memcpy(p + off + 17, (char *)&w + 1, 1);
		assert_int_equal(check_pattern(p + off, PS, fill_seed, off), PS);
	}
	reset_handler(SIGBUS);
	munmap(p, n * PS);
	munmap(staging, PS);
}

static void test_sigbus_fill(void **state)
{
	sigbus_fill(0);
}

/* The signal path needs little stack: a 16 KiB sigaltstack is enough. */
static void test_sigbus_fill_on_sigaltstack(void **state)
{
	const size_t size = 16 << 10;
	stack_t ss = {.ss_sp = map_anon(size, PS), .ss_size = size};
	stack_t off = {.ss_flags = SS_DISABLE};

	assert_int_equal(sigaltstack(&ss, NULL), 0);
	handler_stack = NULL;
	sigbus_fill(SA_ONSTACK);
	assert_int_equal(sigaltstack(&off, NULL), 0);
	assert_true(handler_stack >= (char *)ss.ss_sp && handler_stack < (char *)ss.ss_sp + size);
	munmap(ss.ss_sp, size);
}

static void test_nouserfault(void **state)
{
	char *p = map_anon(4 * PS, PS);

	assert_int_equal(uf_madvise_userfault(p, 4 * PS), 0);
	assert_int_equal(uf_madvise_nouserfault(p, 4 * PS), 0);
	assert_int_equal(((volatile char *)p)[PS], 0); /* ordinary zero-fill again */
	expect_fail(uf_madvise_nouserfault(p + 1, PS), EINVAL);
	munmap(p, 4 * PS);
}

/* Fork; the child runs fn(p) and exits with what it returns.  The status. */
static int in_child(char *p, int (*fn)(char *))
{
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0)
		_exit(fn(p));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return status;
}

static int child_reads_parents_range(char *p)
{
	signal(SIGSEGV, SIG_DFL);
	return ((volatile char *)p)[PS] == 0 ? 1 : 2;
}

/* A child must not read zeros where its parent's pages are missing: the
 * range is not in the child at all (MADV_DONTFORK), so a touch is SIGSEGV. */
static void test_fork_child_cannot_read_zeros(void **state)
{
	char *p = map_anon(4 * PS, PS);
	int status;

	assert_int_equal(uf_madvise_userfault(p, 4 * PS), 0);
	status = in_child(p, child_reads_parents_range);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGSEGV);
	munmap(p, 4 * PS);
}

static int child_arms_own_range(char *unused)
{
	char *q = mmap(NULL, 4 * PS, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (q == MAP_FAILED || uf_madvise_userfault(q, 4 * PS) < 0)
		return 3;
	return touch_sigbus(q + 2 * PS + 5) && bus_addr == q + 2 * PS + 5 ? 0 : 4;
}

/* A child arms memory of its own with its own uffd, not its parent's. */
static void test_child_arms_its_own(void **state)
{
	char *p = map_anon(4 * PS, PS);
	int status;

	assert_int_equal(uf_madvise_userfault(p, 4 * PS), 0);
	status = in_child(p, child_arms_own_range);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(touch_sigbus(p + PS), 1); /* the parent's range is still armed */
	munmap(p, 4 * PS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_unaligned),
	    cmocka_unit_test(test_file_backed_private),
	    cmocka_unit_test(test_shared_anon),
	    cmocka_unit_test(test_mixed_range),
	    cmocka_unit_test(test_stack),
	    cmocka_unit_test(test_hole),
	    cmocka_unit_test(test_touched_is_ebusy),
	    cmocka_unit_test(test_sigbus_si_addr),
	    cmocka_unit_test(test_sigbus_fill),
	    cmocka_unit_test(test_sigbus_fill_on_sigaltstack),
	    cmocka_unit_test(test_nouserfault),
	    cmocka_unit_test(test_fork_child_cannot_read_zeros),
	    cmocka_unit_test(test_child_arms_its_own),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

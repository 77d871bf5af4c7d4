// SPDX-License-Identifier: MIT
/*
 * How the uffd is opened: /dev/userfaultfd first, the userfaultfd syscall
 * when the device cannot be used, and a clear error when neither can.  Each
 * case runs in a child that takes one way away (a seccomp filter for the
 * syscall, a bind mount of /dev/null over the device in a private mount
 * namespace).
 */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "lib/userfault/tests/uf-test.h"

/* userfaultfd(2) fails with ENOSYS from here on */
static int block_syscall(void)
{
	struct sock_filter f[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_userfaultfd, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

/* /dev/userfaultfd becomes /dev/null, in this process only */
static int hide_device(void)
{
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -1;
	return mount("/dev/null", "/dev/userfaultfd", NULL, MS_BIND, NULL);
}

/* Child: arm a page and touch it.  0 SIGBUS at the address, 1 arming
 * failed with the expected message, 2 anything else, 3 setup failed. */
static int arm_and_touch(void)
{
	char *p = mmap(NULL, PS, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return 3;
	if (uf_madvise_userfault(p, PS) < 0) {
		fprintf(stderr, "child: %s\n", uf_last_error());
		return strstr(uf_last_error(), "cannot open a userfaultfd") ? 1 : 2;
	}
	return touch_sigbus(p + 7) && bus_addr == p + 7 ? 0 : 2;
}

static int run_child(bool no_syscall, bool no_device)
{
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		if ((no_device && hide_device() < 0) || (no_syscall && block_syscall() < 0)) {
			perror("child setup");
			_exit(3);
		}
		_exit(arm_and_touch());
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/* run_child() must give want; a child that cannot take a way away skips */
static void expect_child(bool no_syscall, bool no_device, int want, const char *name)
{
	int r = run_child(no_syscall, no_device);

	if (r == 3) {
		print_message("SKIP: %s: cannot hide /dev/userfaultfd or block the syscall here\n", name);
		skip();
	}
	assert_int_equal(r, want);
}

static void test_device_without_syscall(void **state)
{
	if (access("/dev/userfaultfd", R_OK | W_OK) < 0) {
		print_message("SKIP: %s: no usable /dev/userfaultfd (Linux < 6.1?): %s\n", __func__, strerror(errno));
		skip();
	}
	expect_child(true, false, 0, __func__);
}

static void test_syscall_without_device(void **state)
{
	expect_child(false, true, 0, __func__);
}

static void test_neither_is_a_clear_error(void **state)
{
	expect_child(true, true, 1, __func__);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_device_without_syscall),
	    cmocka_unit_test(test_syscall_without_device),
	    cmocka_unit_test(test_neither_is_a_clear_error),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

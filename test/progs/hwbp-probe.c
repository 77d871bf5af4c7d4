// SPDX-License-Identifier: MIT
/*
 * hwbp-probe: do x86 hardware breakpoints set through ptrace fire here?
 *
 *   hwbp-probe [-t SECONDS]
 *
 * The test suite's own answer, to hold criu's and lazyrestore's against.
 * A forked child asks to be traced and stops itself; the parent puts an
 * execute breakpoint on probe_target() (DR0 = its address, DR7 = local
 * enable of slot 0, execute, length 1) with PTRACE_POKEUSER, lets the child
 * run through the function, and waits at most -t seconds (default 5) for it
 * to stop with SIGTRAP at that address with DR6 naming slot 0.  The child is
 * killed and reaped whatever happens.
 *
 * Prints one line and exits 0 "fires", 1 "does not fire: WHY",
 * 2 "cannot probe: WHY" (no ptrace, bad usage).
 */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DR_OFFSET(n) (offsetof(struct user, u_debugreg) + (n) * sizeof(long))
#define DR7_L0	     0x1UL /* local enable of slot 0; R/W0 = 00 (execute), LEN0 = 00 */
#define DR6_B0	     0x1UL

static volatile int sink;

__attribute__((noinline)) static void probe_target(void)
{
	sink++;
	__asm__ volatile("" ::: "memory");
}

/* The address the breakpoint goes on; fork() keeps it the same in the child. */
static void (*volatile target)(void) = probe_target;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void child(void)
{
	if (ptrace(PTRACE_TRACEME, 0, NULL, NULL))
		_exit(3);
	raise(SIGSTOP);
	target();
	_exit(0);
}

/* waitpid with a deadline: 0 and *status once pid changed state, -1 on timeout/error. */
static int wait_bounded(pid_t pid, int *status, double deadline)
{
	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);

		if (r == pid)
			return 0;
		if (r < 0 && errno != EINTR)
			return -1;
		if (now() >= deadline)
			return -1;
		usleep(10000);
	}
}

static void reap(pid_t pid)
{
	int status;

	kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
}

/* 0 fires, 1 does not, 2 cannot tell; why says so. */
static int probe(double secs, char *why, size_t len)
{
	unsigned long addr = (unsigned long)target;
	struct user_regs_struct regs;
	int status = 0, ret = 2;
	long dr6;
	pid_t pid;

	pid = fork();
	if (pid < 0) {
		snprintf(why, len, "fork: %s", strerror(errno));
		return 2;
	}
	if (pid == 0)
		child();

	if (wait_bounded(pid, &status, now() + secs) || !WIFSTOPPED(status) || WSTOPSIG(status) != SIGSTOP) {
		snprintf(why, len, "the child did not stop for tracing (status %#x)", status);
		goto out;
	}
	if (ptrace(PTRACE_POKEUSER, pid, (void *)DR_OFFSET(0), (void *)addr) ||
	    ptrace(PTRACE_POKEUSER, pid, (void *)DR_OFFSET(7), (void *)DR7_L0)) {
		snprintf(why, len, "PTRACE_POKEUSER of DR0/DR7 refused: %s", strerror(errno));
		ret = 1;
		goto out;
	}
	if (ptrace(PTRACE_CONT, pid, NULL, NULL)) {
		snprintf(why, len, "PTRACE_CONT: %s", strerror(errno));
		goto out;
	}
	if (wait_bounded(pid, &status, now() + secs)) {
		snprintf(why, len, "no stop within %g s of running through %#lx", secs, addr);
		ret = 1;
		goto out;
	}
	if (WIFEXITED(status) || WIFSIGNALED(status)) {
		snprintf(why, len, "the child ran through %#lx and %s %d without a trap", addr,
			 WIFEXITED(status) ? "exited with status" : "died of signal",
			 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
		ret = 1;
		pid = 0; /* reaped already */
		goto out;
	}
	if (!WIFSTOPPED(status) || WSTOPSIG(status) != SIGTRAP) {
		snprintf(why, len, "the child stopped with signal %d, not SIGTRAP", WSTOPSIG(status));
		ret = 1;
		goto out;
	}
	errno = 0;
	dr6 = ptrace(PTRACE_PEEKUSER, pid, (void *)DR_OFFSET(6), NULL);
	if (ptrace(PTRACE_GETREGS, pid, NULL, &regs) || errno) {
		snprintf(why, len, "cannot read the trapped child's registers: %s", strerror(errno));
		goto out;
	}
	if (regs.rip != addr || !(dr6 & DR6_B0)) {
		snprintf(why, len, "SIGTRAP at %#llx with DR6 %#lx, not the breakpoint at %#lx", regs.rip, dr6, addr);
		ret = 1;
		goto out;
	}
	snprintf(why, len, "SIGTRAP at %#lx, DR6 %#lx", addr, dr6);
	ret = 0;
out:
	if (pid > 0)
		reap(pid);
	return ret;
}

int main(int argc, char **argv)
{
	char why[256] = "";
	double secs = 5;
	int opt, ret;

	while ((opt = getopt(argc, argv, "t:")) != -1) {
		char *end;

		if (opt != 't') {
			fprintf(stderr, "usage: hwbp-probe [-t SECONDS]\n");
			return 2;
		}
		secs = strtod(optarg, &end);
		if (*end || !(secs > 0 && secs <= 600)) {
			fprintf(stderr, "hwbp-probe: bad -t '%s'\n", optarg);
			return 2;
		}
	}
	ret = probe(secs, why, sizeof(why));
	printf("%s: %s\n", ret == 0 ? "fires" : ret == 1 ? "does not fire" : "cannot probe", why);
	return ret;
}

// SPDX-License-Identifier: MIT
/*
 * engine/tree.c: which processes count as the restore's.  A stand-in for criu
 * ("criu") forks a task the plain way and, like criu for --restore-sibling
 * (runc's restores), clones tasks with CLONE_PARENT, in our pid namespace and
 * in a new one.  Every one of them must be found from its own pid, and an
 * older sibling of "criu" with the same parent must not.  Then the tree is
 * killed through its root.
 */
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "plugin/engine/tree.h"

/* A fork that can be given clone flags (CLONE_PARENT, CLONE_NEWPID). */
static pid_t clone_flags(unsigned long flags)
{
	return (pid_t)syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, 0);
}

static void idle_forever(void)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (;;)
		pause();
}

static void sleep_ms(long ms)
{
	struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
	while (nanosleep(&t, &t) && errno == EINTR)
		;
}

/* The stand-in's pids, as seen here, and the new namespace's inner pids. */
struct tree {
	pid_t criu, child, sib, sib_child, ns_sib;
	int ns_ok; /* 0: the CLONE_NEWPID sibling could not be made (errno in ns_err) */
	int ns_err;
};

/* In "criu": make its tasks, report their pids, stay. */
static void criu_standin(int wfd)
{
	struct tree t = {.criu = getpid()};
	int p[2];

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	t.child = fork();
	if (t.child == 0)
		idle_forever();
	/* each sibling reports its own child's pid through a pipe */
	if (pipe(p))
		_exit(1);
	t.sib = clone_flags(CLONE_PARENT);
	if (t.sib == 0) {
		pid_t c = fork();
		if (c == 0)
			idle_forever();
		if (write(p[1], &c, sizeof(c)) != sizeof(c))
			_exit(1);
		idle_forever();
	}
	if (read(p[0], &t.sib_child, sizeof(pid_t)) != sizeof(pid_t))
		_exit(1);
	t.ns_sib = clone_flags(CLONE_PARENT | CLONE_NEWPID);
	if (t.ns_sib == 0) {
		pid_t c = fork(); /* pid 2 in there */
		if (c == 0)
			idle_forever();
		if (write(p[1], &c, sizeof(c)) != sizeof(c))
			_exit(1);
		idle_forever();
	}
	t.ns_ok = t.ns_sib > 0;
	t.ns_err = t.ns_ok ? 0 : errno;
	pid_t inner;
	if (t.ns_ok && read(p[0], &inner, sizeof(inner)) != sizeof(inner))
		_exit(1);
	if (write(wfd, &t, sizeof(t)) != sizeof(t))
		_exit(1);
	idle_forever();
}

static struct tree T;
static pid_t older; /* a sibling of "criu" born before it */

/* Host pid of the child of ppid whose innermost pid (last NSpid field) is inner; 0 if none. */
static pid_t host_pid_of(pid_t ppid, pid_t inner)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	pid_t found = 0;

	while (d && !found && (de = readdir(d))) {
		char path[300], line[256];
		pid_t pp = -1, in = -1;
		snprintf(path, sizeof(path), "/proc/%s/status", de->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			if (!strncmp(line, "PPid:", 5))
				pp = atoi(line + 5);
			else if (!strncmp(line, "NSpid:", 6))
				in = atoi(strrchr(line, '\t') + 1);
		}
		fclose(f);
		if (pp == ppid && in == inner)
			found = atoi(de->d_name);
	}
	if (d)
		closedir(d);
	return found;
}

static int setup(void **state)
{
	int p[2];

	(void)state;
	older = fork();
	if (older == 0)
		idle_forever();
	/* start times are in clock ticks: let one pass so the older sibling is older */
	sleep_ms(50);
	if (pipe(p))
		return -1;
	pid_t c = fork();
	if (c == 0) {
		close(p[0]);
		criu_standin(p[1]);
	}
	close(p[1]);
	if (read(p[0], &T, sizeof(T)) != sizeof(T))
		return -1;
	close(p[0]);
	return 0;
}

static void reap(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, __WALL);
}

static int teardown(void **state)
{
	(void)state;
	reap(T.criu);
	reap(T.sib);
	reap(T.ns_sib);
	reap(older);
	return 0;
}

static void finds_child_and_siblings(void **state)
{
	(void)state;
	assert_int_equal(lr_tree_find(T.criu, (uint32_t)T.child), T.child);
	assert_int_equal(lr_tree_find(T.criu, (uint32_t)T.sib), T.sib);
	assert_int_equal(lr_tree_find(T.criu, (uint32_t)T.sib_child), T.sib_child);
}

static void not_older_sibling_nor_strangers(void **state)
{
	(void)state;
	assert_int_equal(lr_tree_find(T.criu, (uint32_t)older), 0);
	assert_int_equal(lr_tree_find(T.criu, (uint32_t)getpid()), 0);
	assert_int_equal(lr_tree_find(T.criu, (uint32_t)T.criu), 0);
	assert_int_equal(lr_tree_find(T.criu, 1), T.ns_ok ? T.ns_sib : 0);
}

static void finds_sibling_in_new_pidns(void **state)
{
	(void)state;
	if (!T.ns_ok) {
		print_message("no CLONE_NEWPID here (%s): the namespace case is not run\n", strerror(T.ns_err));
		skip();
	}
	/* criu hands the task over by its pid inside: 1 for the root, 2 for its child */
	assert_int_equal(lr_tree_find(T.criu, 1), T.ns_sib);
	pid_t child = host_pid_of(T.ns_sib, 2);
	assert_true(child > 0);
	assert_int_equal(lr_tree_find(T.criu, 2), child);
}

static void kill_takes_the_sibling_tree(void **state)
{
	int status;
	pid_t roots[] = {T.sib};

	(void)state;
	lr_tree_kill(roots, 1);
	assert_int_equal(waitpid(T.sib, &status, __WALL), T.sib);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	T.sib = 0;
	/* its child was killed too: it is gone or a zombie waiting for a reaper */
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/%d/stat", T.sib_child);
	for (int i = 0; i < 200; i++) {
		FILE *f = fopen(path, "r");
		if (!f)
			return;
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = 0;
		char *p = strrchr(buf, ')');
		if (p && (p[2] == 'Z' || p[2] == 'X'))
			return;
		sleep_ms(10);
	}
	fail_msg("the sibling's child %d still runs after lr_tree_kill", T.sib_child);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(finds_child_and_siblings),
	    cmocka_unit_test(not_older_sibling_nor_strangers),
	    cmocka_unit_test(finds_sibling_in_new_pidns),
	    cmocka_unit_test(kill_takes_the_sibling_tree),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

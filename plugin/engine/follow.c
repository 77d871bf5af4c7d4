// SPDX-License-Identifier: MIT
/*
 * The fault thread on the faulting thread's CPU (opts.follow).
 *
 * A fault served from another CPU costs two cross-CPU wake-ups, ours and then
 * the program's; on a VM whose idle vCPUs halt, each can be a round trip
 * through the host.  Served from the faulting thread's own CPU it is a switch
 * between two threads of one run queue: the program blocks, we run, we copy
 * and wake it, we sleep, it runs.  bench/restore/roundtrip -c same against
 * -c other measures the two; cpuprobe.c decides with the same comparison.
 *
 * So the fault thread pins itself to the CPU the faulting thread last ran on
 * (/proc/PID/task/TID/stat, field 39), looked up at most every FOLLOW_LOOK_NS
 * and moved at most every FOLLOW_MOVE_NS, and sleeps between faults.  The
 * workers stream: with two or more, the first ("near") on that CPU in its
 * idle time (SCHED_IDLE: the program and we preempt it at once), the others
 * off it as ordinary threads at the lowest priority, not in SCHED_IDLE: the
 * scheduler treats a CPU that runs only SCHED_IDLE work as idle, and would
 * wake the program there, away from us.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin/engine/internal.h"
#include "plugin/log/log.h"

#define FOLLOW_LOOK_NS 100000ULL  /* a look costs a pread of a proc file */
#define FOLLOW_MOVE_NS 1000000ULL /* a move costs a migration; two busy CPUs must not toss us */
#define STAT_CPU_FIELD 39	  /* proc(5): "processor", the CPU last run on */

void lr_follow_start(struct lr_engine *e)
{
	struct lr_follow *f = &e->follow;

	f->fd = -1;
	f->cpu = -1;
	if (!e->o.follow || !e->o.workers || e->remote)
		return;
	if (sched_getaffinity(0, sizeof(f->all), &f->all)) {
		pr_warn("fault thread stays where the scheduler puts it: sched_getaffinity: %s", strerror(errno));
		return;
	}
	f->on = CPU_COUNT(&f->all) > 1;
	pthread_mutex_lock(&e->lock);
	e->stats.follow = f->on;
	pthread_mutex_unlock(&e->lock);
}

/* The CPU field of a proc stat line; the command name may hold spaces and ')'. */
static int stat_cpu(const char *line)
{
	const char *p = strrchr(line, ')');
	int field = 2;

	if (!p)
		return -1;
	for (; *p && field < STAT_CPU_FIELD; p++)
		if (*p == ' ')
			field++;
	if (!*p || *p < '0' || *p > '9')
		return -1;
	return atoi(p);
}

/* Open the stat file of pid's thread tid (0, or not one of pid's: pid's main thread). */
static int open_stat(struct lr_follow *f, pid_t pid, pid_t tid)
{
	char path[64];

	if (f->fd >= 0 && f->pid == pid && f->tid == tid)
		return f->fd;
	if (f->fd >= 0)
		close(f->fd);
	f->pid = pid;
	f->tid = tid;
	/* the uffd message's tid is in the faulting task's pid namespace: it may not be pid's here */
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)(tid ? tid : pid));
	f->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (f->fd < 0 && tid) {
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		f->fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	return f->fd;
}

/* The near worker on the fault thread's CPU, the others anywhere but there. */
static void place(struct lr_engine *e, const struct lr_worker *w, pid_t tid, int cpu)
{
	cpu_set_t set = e->follow.all;

	if (tid <= 0 || cpu < 0)
		return;
	if (w->near) {
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
	} else {
		CPU_CLR(cpu, &set);
	}
	if (sched_setaffinity(tid, sizeof(set), &set))
		pr_debug("prefetch worker %d not placed beside CPU %d: %m", tid, cpu);
}

void lr_follow_worker(struct lr_engine *e, const struct lr_worker *w, pid_t tid)
{
	if (e->follow.on)
		place(e, w, tid, __atomic_load_n(&e->follow.cpu, __ATOMIC_SEQ_CST));
}

static void move_to(struct lr_engine *e, int cpu)
{
	struct lr_follow *f = &e->follow;
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	if (sched_setaffinity(0, sizeof(one), &one)) {
		pr_debug("fault thread can't move to CPU %d: %m", cpu);
		return;
	}
	/* published before the workers' tids are read: a worker starting now sees one or the other */
	__atomic_store_n(&f->cpu, cpu, __ATOMIC_SEQ_CST);
	f->moves++;
	for (unsigned i = 0; i < MAX_WORKERS; i++)
		place(e, &e->workers[i], __atomic_load_n(&e->workers[i].tid, __ATOMIC_SEQ_CST), cpu);
}

void lr_follow_fault(struct lr_engine *e, struct lr_task *t, uint32_t tid)
{
	struct lr_follow *f = &e->follow;
	char line[512];

	if (!f->on || !t->real_pid)
		return;
	uint64_t now = lr_now_ns();
	if (now < f->next_look_ns)
		return;
	f->next_look_ns = now + FOLLOW_LOOK_NS;
	int fd = open_stat(f, t->real_pid, (pid_t)tid);
	ssize_t n = fd >= 0 ? pread(fd, line, sizeof(line) - 1, 0) : -1;
	if (n <= 0)
		return; /* gone, or not ours to see: the fault is served from where we are */
	line[n] = 0;
	int cpu = stat_cpu(line);
	if (cpu < 0 || cpu >= CPU_SETSIZE || cpu == f->cpu || !CPU_ISSET(cpu, &f->all) || now < f->next_move_ns)
		return;
	f->next_move_ns = now + FOLLOW_MOVE_NS;
	move_to(e, cpu);
}

/* The fault thread back on every CPU; the workers keep their places until the next move. */
static void unpin(struct lr_follow *f)
{
	if (f->cpu < 0)
		return;
	if (sched_setaffinity(0, sizeof(f->all), &f->all))
		pr_debug("fault thread keeps CPU %d: %m", f->cpu);
	__atomic_store_n(&f->cpu, -1, __ATOMIC_SEQ_CST);
}

void lr_follow_stop(struct lr_engine *e)
{
	struct lr_follow *f = &e->follow;

	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
	int last = f->cpu;
	unpin(f);
	pthread_mutex_lock(&e->lock);
	e->stats.fault_thread_moves = f->moves;
	e->stats.fault_thread_cpu = last;
	pthread_mutex_unlock(&e->lock);
}

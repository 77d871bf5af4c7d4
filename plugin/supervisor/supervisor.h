/* SPDX-License-Identifier: MIT */
/*
 * The supervisor: a small single-threaded parent that keeps a dup of every
 * uffd (from the hand-off and from forks) and the uffd journal, runs the
 * engine in a child process and, if that child is killed, starts a new one
 * that resumes from the images and the journal.  It knows nothing of pages.
 */
#ifndef LAZYRESTORE_SUPERVISOR_H
#define LAZYRESTORE_SUPERVISOR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "plugin/supervisor/journal.h"

#define LR_SV_MAX_RESTARTS 8

struct lr_sv_task {
	int uffd;	   /* the supervisor's dup */
	uint32_t vpid;	   /* 0 for a fork child */
	pid_t real_pid;	   /* 0 if unknown */
	int parent;	   /* -1, or the index of the task that forked it */
	uint64_t fork_pos; /* journal entry of the parent's FORK message */
};

struct lr_sv {
	int sock[2]; /* engine -> supervisor: task records with SCM_RIGHTS */
	struct lr_journal j;
	struct lr_sv_task tasks[LR_JOURNAL_TASKS];
	unsigned nr_tasks;
	unsigned restarts;
};

int lr_sv_init(struct lr_sv *sv);
void lr_sv_fini(struct lr_sv *sv);

/*
 * Run engine(arg, sv, resume) in a child until it exits; restart it (resume
 * true) when it dies of a signal after the hand-off.  Returns the exit status.
 * handoff_fd (the restore's connection) is closed here once the first engine
 * has it, so the restore sees EPIPE if that engine dies during the hand-off.
 */
int lr_supervise(struct lr_sv *sv, int (*engine)(void *arg, struct lr_sv *sv, bool resume), void *arg, int handoff_fd);

/* Engine side: record task idx (its uffd is dup'ed into the supervisor). */
int lr_sv_send_task(struct lr_sv *sv, unsigned idx, const struct lr_sv_task *t);

#endif

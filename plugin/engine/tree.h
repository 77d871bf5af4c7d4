/* SPDX-License-Identifier: MIT */
/* Finding and stopping the processes of a restored tree through /proc. */
#ifndef LAZYRESTORE_TREE_H
#define LAZYRESTORE_TREE_H

#include <stdint.h>
#include <sys/types.h>

/*
 * The descendant of ancestor whose innermost pid (last NSpid field) is vpid:
 * how a task that criu restore forked is found from its image pid.  0 if none.
 */
pid_t lr_tree_find(pid_t ancestor, uint32_t vpid);

/* SIGKILL pids[0..nr) and every descendant of them. */
void lr_tree_kill(const pid_t *pids, size_t nr);

#endif

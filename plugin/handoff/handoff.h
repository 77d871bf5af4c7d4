/* SPDX-License-Identifier: MIT */
/*
 * The lazy-pages.socket protocol of criu restore (CRIU's criu/uffd.c,
 * send_uffd() and LAZY_PAGES_RESTORE_FINISHED):
 * per task [int32 vpid][1 byte + SCM_RIGHTS uffd], zombies as [-vpid], then
 * the uint32 0x52535446 end marker.  Nothing flows back, except with a criu
 * that has criu-patches/0014: a daemon that wrote LR_HOLD_TASKS when it
 * accepted the connection has criu wait, after the end marker, for its
 * LR_RELEASE_TASKS before the tasks run (or for a hang-up, or 60 s).
 */
#ifndef LAZYRESTORE_HANDOFF_H
#define LAZYRESTORE_HANDOFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define LR_LAZY_SOCK_NAME   "lazy-pages.socket"
#define LR_RESTORE_FINISHED 0x52535446U
#define LR_HOLD_TASKS	    0x4c52484cU
#define LR_RELEASE_TASKS    0x4c52524cU

/* What pstree.img says must arrive: each pid exactly once. */
struct lr_handoff_expect {
	const uint32_t *alive;
	size_t nr_alive;
	const uint32_t *zombies;
	size_t nr_zombies;
};

struct lr_handoff_ops {
	/* A live task's uffd (now owned by the callee); real_pid 0 if unknown. */
	int (*task)(void *arg, uint32_t vpid, pid_t real_pid, int uffd);
	void (*finished)(void *arg);
	/* The peer broke the protocol: why names the problem. */
	void (*failed)(void *arg, const char *why);
};

/* Bind and listen on LR_LAZY_SOCK_NAME in the current directory. */
int lr_handoff_listen(void);
/* Accept the restore's connection; *peer = its pid (SO_PEERCRED). */
int lr_handoff_accept(int lfd, pid_t *peer);
/*
 * Ask criu to hold the tasks after the end marker until lr_handoff_release()
 * (before the end marker; a criu without the patch ignores it).
 */
int lr_handoff_hold(int cfd);
/* Let criu release the tasks; quiet: no warning if criu is gone (it released them then). */
int lr_handoff_release(int cfd, bool quiet);
/* Read every record; returns 0 after the end marker, -1 after ops->failed(). */
int lr_handoff_receive(int cfd, pid_t peer, const struct lr_handoff_expect *x, const struct lr_handoff_ops *ops,
		       void *arg);

#endif

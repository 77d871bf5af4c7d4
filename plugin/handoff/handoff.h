/* SPDX-License-Identifier: MIT */
/*
 * The lazy-pages.socket protocol of criu restore (CRIU's criu/uffd.c,
 * send_uffd() and LAZY_PAGES_RESTORE_FINISHED):
 * per task [int32 vpid][1 byte + SCM_RIGHTS uffd], zombies as [-vpid], then
 * the uint32 0x52535446 end marker.  Nothing flows back.
 */
#ifndef LAZYRESTORE_HANDOFF_H
#define LAZYRESTORE_HANDOFF_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define LR_LAZY_SOCK_NAME   "lazy-pages.socket"
#define LR_RESTORE_FINISHED 0x52535446U

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
/* Read every record; returns 0 after the end marker, -1 after ops->failed(). */
int lr_handoff_receive(int cfd, pid_t peer, const struct lr_handoff_expect *x, const struct lr_handoff_ops *ops,
		       void *arg);

#endif

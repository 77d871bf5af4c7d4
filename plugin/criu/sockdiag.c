// SPDX-License-Identifier: MIT
/*
 * Who listens on WORKDIR/lazy-pages.socket?  A probing connect() would be
 * taken by the listener as the restore's own connection (criu lazy-pages and
 * ours accept exactly one), so the plugin asks the kernel instead: sock_diag
 * lists the listening unix sockets with the inode of the file each is bound
 * to, and the length of its accept queue.
 */
#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "plugin/criu/lrplugin.h"

struct want {
	unsigned major, minor;
	ino_t ino;
};

/* The kernel reports a superblock's dev_t in its own encoding (major << 20 | minor). */
static bool same_file(const struct unix_diag_vfs *v, const struct want *w)
{
	return v->udiag_vfs_ino == w->ino && v->udiag_vfs_dev >> 20 == w->major &&
	       (v->udiag_vfs_dev & 0xfffff) == w->minor;
}

/* One reply message: 1 if it is a listener on the file (pending set), else 0. */
static int match(const struct nlmsghdr *h, const struct want *w, unsigned *pending)
{
	const struct unix_diag_msg *m = NLMSG_DATA(h);
	int len = (int)h->nlmsg_len - NLMSG_LENGTH(sizeof(*m));
	bool found = false;
	unsigned rq = 0;

	for (const struct rtattr *a = (const void *)(m + 1); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
		if (a->rta_type == UNIX_DIAG_VFS && RTA_PAYLOAD(a) >= sizeof(struct unix_diag_vfs))
			found = same_file(RTA_DATA(a), w);
		else if (a->rta_type == UNIX_DIAG_RQLEN && RTA_PAYLOAD(a) >= sizeof(struct unix_diag_rqlen))
			rq = ((const struct unix_diag_rqlen *)RTA_DATA(a))->udiag_rqueue;
	}
	if (found)
		*pending = rq;
	return found;
}

static int ask(int fd)
{
	struct {
		struct nlmsghdr h;
		struct unix_diag_req r;
	} req = {
	    .h = {.nlmsg_len = sizeof(req),
		  .nlmsg_type = SOCK_DIAG_BY_FAMILY,
		  .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP},
	    .r = {.sdiag_family = AF_UNIX,
		  .udiag_states = 1 << TCP_LISTEN,
		  .udiag_show = UDIAG_SHOW_VFS | UDIAG_SHOW_RQLEN},
	};
	struct sockaddr_nl nl = {.nl_family = AF_NETLINK};

	return sendto(fd, &req, sizeof(req), 0, (struct sockaddr *)&nl, sizeof(nl)) == sizeof(req) ? 0 : -1;
}

static int scan(int fd, const struct want *w, unsigned *pending)
{
	static char buf[32768] __attribute__((aligned(NLMSG_ALIGNTO)));
	int found = 0;

	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		for (struct nlmsghdr *h = (void *)buf; NLMSG_OK(h, (unsigned)n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_DONE)
				return found;
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);
				errno = -e->error;
				return -1;
			}
			if (!found && h->nlmsg_type == SOCK_DIAG_BY_FAMILY)
				found = match(h, w, pending);
		}
	}
}

int lrp_listener(const char *path, unsigned *pending)
{
	struct stat st;
	struct want w;
	int fd, ret, saved;

	*pending = 0;
	if (stat(path, &st))
		return errno == ENOENT ? 0 : -1;
	if (!S_ISSOCK(st.st_mode))
		return 0;
	w = (struct want){major(st.st_dev), minor(st.st_dev), st.st_ino};
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (fd < 0)
		return -1;
	ret = ask(fd) ? -1 : scan(fd, &w, pending);
	saved = errno;
	close(fd);
	errno = saved;
	return ret;
}

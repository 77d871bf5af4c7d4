// SPDX-License-Identifier: MIT
/*
 * `lazyrestore page-server`: serve a dump's pages over TCP with CRIU's
 * page-server protocol (PS_IOV_GET -> PS_IOV_ADD_F + pages), as
 * `criu page-server --lazy-pages` does, but straight from the mmap of the
 * pages files: no page pipes, so no pipe-size limit, and every request is
 * checked against the images before a byte is sent.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "images/image.h"
#include "plugin/cli/commands.h"
#include "plugin/log/log.h"
#include "plugin/pageserver/protocol.h"

static const char usage_text[] =
    "usage: lazyrestore page-server -D DIR --port PORT [OPTIONS]\n"
    "\n"
    "Serve the pages of the CRIU dump in DIR to one client over TCP, speaking\n"
    "CRIU's page-server protocol: each PS_IOV_GET (pid, address, count) is\n"
    "answered with PS_IOV_ADD_F and the pages, read from the mmap of the\n"
    "pages files.  This is what `criu lazy-pages --page-server` and remote lazy\n"
    "restores ask.  Unlike `criu page-server --lazy-pages` it needs no page\n"
    "pipes (so no fs.pipe-max-size or CAP_SYS_RESOURCE), and a request for a\n"
    "page the dump does not hold is an error naming the peer and the request,\n"
    "never an answer with wrong bytes.  It exits after the client's\n"
    "PS_IOV_CLOSE (0), or when the client breaks the protocol (1).\n"
    "\n"
    "options:\n"
    "  -D, --images-dir DIR   the dump to serve (default: .)\n"
    "      --address ADDR     address to listen on (default: all)\n"
    "      --port PORT        TCP port; 0 picks a free one and prints it\n"
    "  -o, --log-file FILE    log here ('-' = stdout; default stderr)\n"
    "  -v[v...], -vN, --verbosity[=N]\n"
    "                         log level: 1 errors, 2 +warnings (default), 3 +info, 4 +debug\n"
    "      --status-fd FD     write one 0x00 byte to FD once listening, then close it\n"
    "  -h, --help             this text\n";

struct ps_task {
	uint32_t pid;
	const struct img_mm *mm; /* in dump */
	struct img_pages pages;
};

struct ps_server {
	struct img_dump dump;
	struct ps_task *tasks;
	struct ps_image *images; /* what ps_answer_get() serves, one per task */
	size_t nr_tasks;
	int sk;
	char peer[INET6_ADDRSTRLEN + 16];
	uint64_t rx_off; /* bytes read from the peer so far, for error messages */
	uint64_t pages_sent, requests;
};

static int load_images(struct ps_server *s, const char *path)
{
	struct img_dump *d = &s->dump;
	struct img_err err;

	if (img_dump_load(path, d, &err)) {
		pr_err("%s\n", err.msg);
		return -1;
	}
	s->tasks = calloc(d->nr_alive + 1, sizeof(*s->tasks));
	s->images = calloc(d->nr_alive + 1, sizeof(*s->images));
	if (!s->tasks || !s->images)
		return -1;
	for (size_t i = 0; i < d->nr_alive; i++) {
		struct ps_task *t = &s->tasks[s->nr_tasks++];

		t->pid = d->alive[i];
		t->mm = &d->mms[i];
		t->pages.fd = -1;
		if (t->mm->pages_bytes && img_pages_map(d->dir, t->mm->pages_id, &t->pages, &err)) {
			pr_err("%s\n", err.msg);
			return -1;
		}
	}
	for (size_t i = 0; i < s->nr_tasks; i++)
		s->images[i] =
		    (struct ps_image){s->tasks[i].pid, s->tasks[i].mm, s->tasks[i].pages.base, s->tasks[i].pages.size};
	return 0;
}

static void unload_images(struct ps_server *s)
{
	for (size_t i = 0; i < s->nr_tasks; i++)
		img_pages_unmap(&s->tasks[i].pages);
	free(s->tasks);
	free(s->images);
	img_dump_free(&s->dump);
}

/* 1 with len bytes read, 0 on EOF before the first byte, -1 on error or EOF inside. */
static int read_full(struct ps_server *s, void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = recv(s->sk, (char *)buf + done, len - done, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			pr_perror("peer %s: offset %llu: recv", s->peer, (unsigned long long)(s->rx_off + done));
			return -1;
		}
		if (r == 0) {
			if (done == 0)
				return 0;
			pr_err("peer %s: offset %llu: connection closed inside a %zu-byte request (%zu read)\n",
			       s->peer, (unsigned long long)s->rx_off, len, done);
			return -1;
		}
		done += r;
	}
	s->rx_off += len;
	return 1;
}

static int send_iov(struct ps_server *s, struct iovec *iov, int n)
{
	while (n > 0) {
		ssize_t w = sendmsg(s->sk, &(struct msghdr){.msg_iov = iov, .msg_iovlen = n}, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			pr_perror("peer %s: send", s->peer);
			return -1;
		}
		while (n > 0 && (size_t)w >= iov->iov_len) {
			w -= iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= w;
		}
	}
	return 0;
}

/* Answer a GET with at most the pages of one present pagemap entry, straight from the mmap. */
static int serve_get(struct ps_server *s, const struct ps_iov *req, uint64_t req_off)
{
	const uint8_t *data;
	struct ps_iov reply;
	char why[200];

	if (ps_answer_get(s->images, s->nr_tasks, req, &reply, &data, why, sizeof(why))) {
		pr_err("peer %s: offset %llu: %s\n", s->peer, (unsigned long long)req_off, why);
		return -1;
	}
	struct iovec iov[2] = {
	    {.iov_base = &reply, .iov_len = sizeof(reply)},
	    {.iov_base = (void *)data, .iov_len = (size_t)reply.nr_pages << IMG_PAGE_SHIFT},
	};
	pr_debug("peer %s: GET pid %llu %#llx %u pages -> %u\n", s->peer, (unsigned long long)req->dst_id,
		 (unsigned long long)req->vaddr, req->nr_pages, reply.nr_pages);
	if (send_iov(s, iov, 2))
		return -1;
	s->pages_sent += reply.nr_pages;
	return 0;
}

static int send_status(struct ps_server *s)
{
	int32_t zero = 0;
	struct iovec iov = {.iov_base = &zero, .iov_len = sizeof(zero)};

	return send_iov(s, &iov, 1);
}

/* The session: 0 after a clean CLOSE, -1 on any protocol or I/O error. */
static int serve(struct ps_server *s)
{
	for (;;) {
		uint64_t off = s->rx_off;
		struct ps_iov req;
		char why[160];
		int r = read_full(s, &req, sizeof(req));

		if (r <= 0) {
			if (r == 0)
				pr_err("peer %s: offset %llu: closed the connection without PS_IOV_CLOSE\n", s->peer,
				       (unsigned long long)off);
			return -1;
		}
		s->requests++;
		switch (ps_check_request(&req, why, sizeof(why))) {
		case PS_REQ_GET:
			if (serve_get(s, &req, off))
				return -1;
			break;
		case PS_REQ_CLOSE:
			/* answer, then wait for the peer to hang up (as CRIU's server does) */
			if (send_status(s))
				return -1;
			while ((r = read_full(s, &req, 1)) == 1)
				;
			return r == 0 ? 0 : -1;
		case PS_REQ_FORCE_CLOSE:
			return send_status(s);
		default:
			pr_err("peer %s: offset %llu: %s\n", s->peer, (unsigned long long)off, why);
			return -1;
		}
	}
}

static int listen_on(const char *address, int port, int *chosen)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
	struct addrinfo *res, *ai;
	char portstr[16];
	int sk = -1, rc, one = 1;

	snprintf(portstr, sizeof(portstr), "%d", port);
	rc = getaddrinfo(address, portstr, &hints, &res);
	if (rc) {
		pr_err("page-server: address %s: %s\n", address ? address : "(any)", gai_strerror(rc));
		return -1;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		sk = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (sk < 0)
			continue;
		if (setsockopt(sk, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 &&
		    bind(sk, ai->ai_addr, ai->ai_addrlen) == 0 && listen(sk, 1) == 0)
			break;
		pr_perror("page-server: bind/listen %s:%d", address ? address : "(any)", port);
		close(sk);
		sk = -1;
	}
	freeaddrinfo(res);
	if (sk >= 0) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);

		if (getsockname(sk, (struct sockaddr *)&ss, &sl) == 0)
			*chosen = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
								 : ((struct sockaddr_in *)&ss)->sin_port);
	}
	return sk;
}

static int accept_peer(struct ps_server *s, int lsk)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "?";
	int one = 1;

	do
		s->sk = accept4(lsk, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
	while (s->sk < 0 && errno == EINTR);
	if (s->sk < 0) {
		pr_perror("page-server: accept");
		return -1;
	}
	if (ss.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, host, sizeof(host));
	else if (ss.ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, host, sizeof(host));
	snprintf(s->peer, sizeof(s->peer), "%s:%d", host,
		 ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						: ((struct sockaddr_in *)&ss)->sin_port));
	/* answers go out whole and at once: a fault is waiting for each */
	setsockopt(s->sk, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	pr_info("page-server: client %s\n", s->peer);
	return 0;
}

static int parse_num(const char *opt, const char *v, long max, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(v, &end, 10);
	if (errno || end == v || *end || *out < 0 || *out > max) {
		fprintf(stderr, "lazyrestore page-server: %s: bad value '%s' (0..%ld)\n", opt, v, max);
		return -1;
	}
	return 0;
}

enum { OPT_ADDRESS = 256, OPT_PORT, OPT_STATUS_FD, OPT_VERBOSITY, OPT_PIDFILE, OPT_COMPAT };

static int write_pidfile(const char *path)
{
	FILE *f = fopen(path, "w");

	if (!f || fprintf(f, "%d\n", getpid()) < 0 || fclose(f)) {
		pr_perror("page-server: --pidfile %s", path);
		return -1;
	}
	return 0;
}

int cmd_page_server(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"images-dir", required_argument, NULL, 'D'},
	    {"address", required_argument, NULL, OPT_ADDRESS},
	    {"port", required_argument, NULL, OPT_PORT},
	    {"log-file", required_argument, NULL, 'o'},
	    {"verbosity", optional_argument, NULL, OPT_VERBOSITY},
	    {"status-fd", required_argument, NULL, OPT_STATUS_FD},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *dir = ".", *address = NULL, *log = NULL, *pidfile = NULL;
	long port = -1, status_fd = -1;
	int c, level = LR_LOG_WARN, lsk, chosen = 0, ret = 1;
	struct ps_server s = {.sk = -1};

	/* "v::" as in criu: -v, -vv..., or -vN */
	while ((c = getopt_long(argc, argv, "D:o:v::h", opts, NULL)) != -1) {
		switch (c) {
		case 'D':
			dir = optarg;
			break;
		case OPT_ADDRESS:
			address = optarg;
			break;
		case OPT_PORT:
			if (parse_num("--port", optarg, 65535, &port))
				return 2;
			break;
		case 'o':
			log = optarg;
			break;
		case 'v':
		case OPT_VERBOSITY:
			if (lr_log_verbosity_opt(optarg, &level))
				return 2;
			break;
		case OPT_STATUS_FD:
			if (parse_num("--status-fd", optarg, INT_MAX, &status_fd))
				return 2;
			break;
		case OPT_PIDFILE:
			pidfile = optarg;
			break;
		case OPT_COMPAT:
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		default:
			fputs("Try 'lazyrestore page-server --help'.\n", stderr);
			return 2;
		}
	}
	if (optind < argc || port < 0) {
		fprintf(stderr, "lazyrestore page-server: %s\n",
			port < 0 ? "--port is required" : "unexpected argument");
		return 2;
	}
	if (lr_log_open(log))
		return 1;
	lr_log_set_level(level);
	signal(SIGPIPE, SIG_IGN);

	if ((pidfile && write_pidfile(pidfile)) || load_images(&s, dir))
		goto out;
	lsk = listen_on(address, (int)port, &chosen);
	if (lsk < 0)
		goto out;
	if (port == 0) {
		printf("lazyrestore page-server: listening on port %d\n", chosen);
		fflush(stdout);
	}
	pr_info("page-server: serving %s on %s:%d\n", dir, address ? address : "*", chosen);
	if (status_fd >= 0) {
		char zero = 0;

		if (write((int)status_fd, &zero, 1) != 1)
			pr_perror("page-server: --status-fd %ld", status_fd);
		close((int)status_fd);
	}
	if (accept_peer(&s, lsk) == 0)
		ret = serve(&s) ? 1 : 0;
	close(lsk);
	pr_info("page-server: %llu requests, %llu pages sent to %s\n", (unsigned long long)s.requests,
		(unsigned long long)s.pages_sent, s.peer);
out:
	if (s.sk >= 0)
		close(s.sk);
	unload_images(&s);
	lr_log_close();
	return ret;
}

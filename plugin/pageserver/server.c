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
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "images/image.h"
#include "plugin/cli/commands.h"
#include "plugin/log/log.h"
#include "plugin/pageserver/protocol.h"
#include "plugin/transport/io.h"

#define TLS_HANDSHAKE_MS 10000
#define MAX_OPEN	 256 /* connections served at once */

static const char usage_text[] =
    "usage: lazyrestore page-server -D DIR --port PORT [OPTIONS]\n"
    "\n"
    "Serve the pages of the CRIU dump in DIR over TCP, speaking CRIU's\n"
    "page-server protocol: each PS_IOV_GET (pid, address, count) is answered\n"
    "with PS_IOV_ADD_F and the pages, sent from the pages files (sendfile;\n"
    "with TLS, encrypted from their mapping).\n"
    "This is what `criu lazy-pages --page-server` and remote lazy restores ask.\n"
    "Unlike `criu page-server --lazy-pages` it needs no page pipes (so no\n"
    "fs.pipe-max-size or CAP_SYS_RESOURCE), serves many clients at once (each\n"
    "connection on its own thread: many restores of one dump, or a restore's\n"
    "urgent second connection), and a request for a page the dump does not\n"
    "hold ends that session with an error naming the peer and the request,\n"
    "never an answer with wrong bytes.  It exits once --sessions connections\n"
    "have been accepted and none is open any more: 0 if every session ended\n"
    "with PS_IOV_CLOSE, 1 if any client broke the protocol.\n"
    "\n"
    "options:\n"
    "  -D, --images-dir DIR   the dump to serve (default: .)\n"
    "      --address ADDR     address to listen on (default: 127.0.0.1; the\n"
    "                         first log line says which)\n"
    "      --port PORT        TCP port; 0 picks a free one and prints it\n"
    "      --sessions N       exit after N connections, once none is open\n"
    "                         (default 1; 0 = serve until killed)\n"
    "      --wire 4.1|4.2     header format: CRIU 4.1.1's 24 bytes (default) or\n"
    "                         the 32-byte one with a 64-bit page count\n"
    "      --tcp-congestion NAME\n"
    "                         the sessions' TCP congestion control (as in\n"
    "                         /proc/sys/net/ipv4/tcp_available_congestion_control);\n"
    "                         default: cubic (else reno) for a client on this host,\n"
    "                         where a pacing one such as bbr only slows the stream,\n"
    "                         the system's for any other\n"
    "      --tls              TLS as criu's: X.509 both ways, a client certificate\n"
    "                         signed by the CA is required before any byte is served\n"
    "      --tls-cacert FILE  CA (default /etc/pki/CA/cacert.pem + the system's)\n"
    "      --tls-cacrl FILE   revocation list (default /etc/pki/CA/cacrl.pem if present)\n"
    "      --tls-cert FILE    our certificate (default /etc/pki/criu/cert.pem)\n"
    "      --tls-key FILE     its key (default /etc/pki/criu/private/key.pem)\n"
    "      --tls-no-cn-verify do not check the client certificate's name against\n"
    "                         --address (checked only when --address is given)\n"
    "  -o, --log-file FILE    log here ('-' = stdout; default stderr)\n"
    "  -v[v...], -vN, --verbosity[=N]\n"
    "                         log level: 1 errors, 2 +warnings (default), 3 +info, 4 +debug\n"
    "      --status-fd FD     write one 0x00 byte to FD once listening, then close it\n"
    "      --pidfile FILE     write our pid to FILE before serving (as criu page-server)\n"
    "      --lazy-pages, --no-default-config\n"
    "                         accepted for criu page-server's command line (zdtm's);\n"
    "                         pages are always served from the images, lazily\n"
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
	enum ps_wire wire;
	struct lr_tls_creds *tls; /* NULL: plain TCP */
	const char *verify_host;  /* with TLS: the client's certificate must name it (criu: --address) */
	const char *congestion;	  /* TCP congestion control of the sessions; NULL: lr_io_congestion()'s choice */
	/* the sessions: how many are open, how many failed; under lock */
	pthread_mutex_t lock;
	unsigned open, accepted, failed;
	uint64_t pages_sent, requests;
};

/* One client connection, served by its own thread; the images are shared read-only. */
struct ps_conn {
	struct ps_server *srv;
	struct lr_io io;
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
		s->images[i] = (struct ps_image){s->tasks[i].pid, s->tasks[i].mm, s->tasks[i].pages.base,
						 s->tasks[i].pages.size, s->tasks[i].pages.fd};
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
static int read_full(struct ps_conn *s, void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		char why[160];
		ssize_t r = lr_io_recv(&s->io, (char *)buf + done, len - done, why, sizeof(why));

		if (r < 0) {
			pr_err("peer %s: offset %llu: %s\n", s->peer, (unsigned long long)(s->rx_off + done), why);
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

/*
 * Over TLS: each buffer in records of its own.  criu's client reads an
 * answer's header, then waits for the socket to be readable before reading
 * the pages: pages in the header's record would sit decrypted in gnutls'
 * buffer with the socket empty, and that client would wait forever.
 */
static int send_iov_tls(struct ps_conn *s, struct iovec *iov, int n)
{
	char why[160];

	for (int i = 0; i < n; i++) {
		lr_io_cork(&s->io);
		for (size_t off = 0; off < iov[i].iov_len;) {
			ssize_t w =
			    lr_io_send(&s->io, (char *)iov[i].iov_base + off, iov[i].iov_len - off, why, sizeof(why));

			if (w < 0) {
				pr_err("peer %s: %s\n", s->peer, why);
				return -1;
			}
			off += (size_t)w;
		}
		if (lr_io_uncork(&s->io, why, sizeof(why))) {
			pr_err("peer %s: %s\n", s->peer, why);
			return -1;
		}
	}
	return 0;
}

/* flags: MSG_MORE when the pages follow by sendfile (one segment for both on the wire) */
static int send_iov_flags(struct ps_conn *s, struct iovec *iov, int n, int flags)
{
	if (s->io.tls)
		return send_iov_tls(s, iov, n);
	while (n > 0) {
		ssize_t w = sendmsg(s->sk, &(struct msghdr){.msg_iov = iov, .msg_iovlen = n}, MSG_NOSIGNAL | flags);

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

static int send_iov(struct ps_conn *s, struct iovec *iov, int n)
{
	return send_iov_flags(s, iov, n, 0);
}

/*
 * Plain TCP: the pages go from the page cache to the socket by sendfile, not
 * through the mapping: a first read of each mapped page is a page fault, and
 * on a PVM guest (shadow page tables) those made our session thread the
 * bottleneck of a loopback restore (bench/net/README.md).
 */
static int send_pages(struct ps_conn *s, const struct ps_image *im, const uint8_t *data, size_t len)
{
	off_t off = (off_t)(data - im->pages);

	if (im->pages_fd < 0) {
		struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
		return send_iov(s, &iov, 1);
	}
	while (len) {
		ssize_t w = sendfile(s->sk, im->pages_fd, &off, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			pr_perror("peer %s: sendfile of pages-%u.img at %lld", s->peer, im->mm->pages_id,
				  (long long)off);
			return -1;
		}
		if (w == 0) { /* the file shrank under us */
			pr_err("peer %s: pages-%u.img ends at %lld, inside an answer\n", s->peer, im->mm->pages_id,
			       (long long)off);
			return -1;
		}
		len -= (size_t)w;
	}
	return 0;
}

/* Answer a GET with at most the pages of one present pagemap entry, from the pages file. */
static int serve_get(struct ps_conn *s, const struct ps_iov *req, uint64_t req_off)
{
	const struct ps_image *im;
	const uint8_t *data;
	struct ps_iov reply;
	char why[200];

	if (ps_answer_get(s->srv->images, s->srv->nr_tasks, req, &reply, &data, &im, why, sizeof(why))) {
		pr_err("peer %s: offset %llu: %s\n", s->peer, (unsigned long long)req_off, why);
		return -1;
	}
	uint8_t hdr[PS_HDR_MAX];
	struct iovec iov[2] = {
	    {.iov_base = hdr, .iov_len = ps_hdr_encode(s->srv->wire, &reply, hdr)},
	    {.iov_base = (void *)data, .iov_len = (size_t)reply.nr_pages << IMG_PAGE_SHIFT},
	};
	pr_debug("peer %s: GET pid %llu %#llx %u pages -> %u\n", s->peer, (unsigned long long)req->dst_id,
		 (unsigned long long)req->vaddr, req->nr_pages, reply.nr_pages);
	bool pages = iov[1].iov_len > 0;
	int r = s->io.tls ? send_iov(s, iov, 2)
			  : send_iov_flags(s, iov, 1, pages ? MSG_MORE : 0) ||
				(pages && send_pages(s, im, data, iov[1].iov_len));
	if (r)
		return -1;
	s->pages_sent += reply.nr_pages;
	return 0;
}

static int send_status(struct ps_conn *s)
{
	int32_t zero = 0;
	struct iovec iov = {.iov_base = &zero, .iov_len = sizeof(zero)};

	return send_iov(s, &iov, 1);
}

/* The session: 0 after a clean CLOSE, -1 on any protocol or I/O error. */
static int serve(struct ps_conn *s)
{
	for (;;) {
		uint64_t off = s->rx_off;
		uint8_t hdr[PS_HDR_MAX];
		struct ps_iov req;
		char why[160];
		int r = read_full(s, hdr, ps_hdr_size(s->srv->wire));

		if (r <= 0) {
			if (r == 0)
				pr_err("peer %s: offset %llu: closed the connection without PS_IOV_CLOSE\n", s->peer,
				       (unsigned long long)off);
			return -1;
		}
		s->requests++;
		if (ps_hdr_decode(s->srv->wire, hdr, &req, why, sizeof(why))) {
			pr_err("peer %s: offset %llu: %s\n", s->peer, (unsigned long long)off, why);
			return -1;
		}
		switch (ps_check_request(&req, why, sizeof(why))) {
		case PS_REQ_GET:
			if (serve_get(s, &req, off))
				return -1;
			break;
		case PS_REQ_CLOSE:
			/* answer, then wait for the peer to hang up (as CRIU's server does) */
			if (send_status(s))
				return -1;
			while ((r = read_full(s, hdr, 1)) == 1)
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
		pr_err("page-server: address %s: %s\n", address, gai_strerror(rc));
		return -1;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		sk = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (sk < 0)
			continue;
		if (setsockopt(sk, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 &&
		    bind(sk, ai->ai_addr, ai->ai_addrlen) == 0 && listen(sk, 64) == 0)
			break;
		pr_perror("page-server: bind/listen %s:%d", address, port);
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

static int accept_peer(struct ps_conn *c, int lsk)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "?", why[200], cc[16];
	socklen_t cl = sizeof(cc);
	int one = 1;

	do
		c->sk = accept4(lsk, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
	while (c->sk < 0 && errno == EINTR);
	if (c->sk < 0) {
		pr_perror("page-server: accept");
		return -1;
	}
	if (ss.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, host, sizeof(host));
	else if (ss.ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, host, sizeof(host));
	snprintf(c->peer, sizeof(c->peer), "%s:%d", host,
		 ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						: ((struct sockaddr_in *)&ss)->sin_port));
	/* answers go out whole and at once: a fault is waiting for each */
	setsockopt(c->sk, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* a congestion control named is the listening socket's, which accepted ones inherit */
	if (!c->srv->congestion && lr_io_congestion(c->sk, NULL, why, sizeof(why)))
		pr_warn("page-server: peer %s: %s\n", c->peer, why);
	cc[0] = 0;
	getsockopt(c->sk, IPPROTO_TCP, TCP_CONGESTION, cc, &cl);
	pr_info("page-server: client %s (TCP congestion control %s)\n", c->peer, cc[0] ? cc : "?");
	return 0;
}

/* One session's thread: serve, then account for it and free the connection. */
static void *session(void *arg)
{
	struct ps_conn *c = arg;
	struct ps_server *s = c->srv;
	char why[600];
	int rc;

	c->io = (struct lr_io){.sk = c->sk};
	if (s->tls && lr_io_tls_start(&c->io, s->tls, true, s->verify_host, TLS_HANDSHAKE_MS, why, sizeof(why))) {
		/* no certificate the CA signed, no byte of memory */
		pr_err("peer %s: offset 0: %s\n", c->peer, why);
		rc = -1;
	} else {
		if (s->tls)
			pr_info("page-server: peer %s: TLS handshake done, certificate verified\n", c->peer);
		rc = serve(c);
	}

	pr_info("page-server: %llu requests, %llu pages sent to %s%s\n", (unsigned long long)c->requests,
		(unsigned long long)c->pages_sent, c->peer, rc ? " (session failed)" : "");
	c->io.sk = c->sk;
	lr_io_close(&c->io, rc == 0);
	pthread_mutex_lock(&s->lock);
	s->open--;
	s->failed += rc != 0;
	s->requests += c->requests;
	s->pages_sent += c->pages_sent;
	pthread_mutex_unlock(&s->lock);
	free(c);
	return NULL;
}

static int start_session(struct ps_server *s, int lsk)
{
	struct ps_conn *c = calloc(1, sizeof(*c));
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	if (!c) {
		pr_err("page-server: out of memory for a connection\n");
		return -1;
	}
	c->srv = s;
	if (accept_peer(c, lsk)) {
		free(c);
		return -1;
	}
	pthread_mutex_lock(&s->lock);
	if (s->open >= MAX_OPEN) {
		/* a thread per connection: past this many at once, a peer is flooding us */
		pthread_mutex_unlock(&s->lock);
		pr_warn("page-server: peer %s: refused, %u connections open already\n", c->peer, MAX_OPEN);
		close(c->sk);
		free(c);
		return 0;
	}
	s->open++;
	s->accepted++;
	pthread_mutex_unlock(&s->lock);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &attr, session, c);
	pthread_attr_destroy(&attr);
	if (rc) {
		errno = rc;
		pr_perror("page-server: peer %s: cannot start its session", c->peer);
		close(c->sk);
		pthread_mutex_lock(&s->lock);
		s->open--;
		s->failed++;
		pthread_mutex_unlock(&s->lock);
		free(c);
	}
	return 0;
}

/*
 * Accept and serve every client, each on its own thread, until `sessions`
 * connections have been accepted and none is open any more (0: forever).
 * Returns 0 if every session ended cleanly.
 */
static int serve_all(struct ps_server *s, int lsk, unsigned sessions)
{
	for (;;) {
		struct pollfd p = {.fd = lsk, .events = POLLIN};
		unsigned open, accepted;
		int r = poll(&p, 1, 100);

		if (r < 0 && errno != EINTR) {
			pr_perror("page-server: poll");
			return -1;
		}
		if (r > 0 && start_session(s, lsk))
			return -1;
		if (r > 0)
			continue;
		pthread_mutex_lock(&s->lock);
		open = s->open;
		accepted = s->accepted;
		pthread_mutex_unlock(&s->lock);
		if (sessions && accepted >= sessions && open == 0)
			return s->failed ? -1 : 0;
	}
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

enum {
	OPT_ADDRESS = 256,
	OPT_PORT,
	OPT_STATUS_FD,
	OPT_VERBOSITY,
	OPT_PIDFILE,
	OPT_COMPAT,
	OPT_SESSIONS,
	OPT_WIRE,
	OPT_CONGESTION,
	OPT_TLS,
};

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
	    {"sessions", required_argument, NULL, OPT_SESSIONS},
	    {"wire", required_argument, NULL, OPT_WIRE},
	    {"tcp-congestion", required_argument, NULL, OPT_CONGESTION},
	    LR_TLS_LONGOPTS(OPT_TLS),
	    {"log-file", required_argument, NULL, 'o'},
	    {"verbosity", optional_argument, NULL, OPT_VERBOSITY},
	    {"status-fd", required_argument, NULL, OPT_STATUS_FD},
	    {"pidfile", required_argument, NULL, OPT_PIDFILE},
	    {"lazy-pages", no_argument, NULL, OPT_COMPAT},
	    {"no-default-config", no_argument, NULL, OPT_COMPAT},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *dir = ".", *address = "127.0.0.1", *log = NULL, *pidfile = NULL;
	long port = -1, status_fd = -1, sessions = 1;
	int c, level = LR_LOG_WARN, lsk, chosen = 0, ret = 1;
	struct ps_server s = {.wire = PS_WIRE_24};
	struct lr_tls_opts tls = {0};
	bool address_given = false;
	char err[600];

	/* "v::" as in criu: -v, -vv..., or -vN */
	while ((c = getopt_long(argc, argv, "D:o:v::h", opts, NULL)) != -1) {
		if (c >= OPT_TLS && c < OPT_TLS + LR_TLS_NR_OPTS) {
			lr_tls_opt(&tls, c - OPT_TLS, optarg);
			continue;
		}
		switch (c) {
		case 'D':
			dir = optarg;
			break;
		case OPT_ADDRESS:
			address = optarg;
			address_given = true;
			break;
		case OPT_PORT:
			if (parse_num("--port", optarg, 65535, &port))
				return 2;
			break;
		case OPT_SESSIONS:
			if (parse_num("--sessions", optarg, INT_MAX, &sessions))
				return 2;
			break;
		case OPT_WIRE:
			if (ps_wire_parse(optarg, &s.wire)) {
				fprintf(stderr, "lazyrestore page-server: --wire: '%s' is not 4.1 or 4.2\n", optarg);
				return 2;
			}
			break;
		case OPT_CONGESTION:
			if (!*optarg || strlen(optarg) >= 16) {
				fprintf(stderr, "lazyrestore page-server: --tcp-congestion: '%s' is not a name\n",
					optarg);
				return 2;
			}
			s.congestion = optarg;
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
	pthread_mutex_init(&s.lock, NULL);
	if (tls.on) {
		s.tls = lr_tls_creds_load(&tls, err, sizeof(err));
		if (!s.tls) {
			pr_err("page-server: %s\n", err);
			goto out_log;
		}
		/* as criu's page server: the client's certificate is checked against --address, if given */
		s.verify_host = address_given && !tls.no_cn_verify ? address : NULL;
	}

	lsk = listen_on(address, (int)port, &chosen);
	if (lsk < 0)
		goto out_log;
	/* the first line: where the pages are reachable (warning level, so it is always there) */
	pr_warn("page-server: listening on %s port %d (%s header, %s)\n", address, chosen,
		s.wire == PS_WIRE_32 ? "32-byte" : "24-byte", s.tls ? "TLS, client certificate required" : "plain TCP");
	if (s.congestion && lr_io_congestion(lsk, s.congestion, err, sizeof(err))) {
		pr_err("page-server: --tcp-congestion: %s\n", err);
		goto out;
	}
	if ((pidfile && write_pidfile(pidfile)) || load_images(&s, dir))
		goto out;
	if (port == 0) {
		printf("lazyrestore page-server: listening on port %d\n", chosen);
		fflush(stdout);
	}
	pr_info("page-server: serving %s on %s:%d\n", dir, address, chosen);
	if (status_fd >= 0) {
		char zero = 0;

		if (write((int)status_fd, &zero, 1) != 1)
			pr_perror("page-server: --status-fd %ld", status_fd);
		close((int)status_fd);
	}
	ret = serve_all(&s, lsk, (unsigned)sessions) ? 1 : 0;
	pr_info("page-server: %u sessions (%u failed), %llu requests, %llu pages sent\n", s.accepted, s.failed,
		(unsigned long long)s.requests, (unsigned long long)s.pages_sent);
out:
	close(lsk);
	unload_images(&s);
out_log:
	lr_tls_creds_free(s.tls);
	lr_log_close();
	return ret;
}

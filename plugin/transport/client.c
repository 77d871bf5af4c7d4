// SPDX-License-Identifier: MIT
/*
 * The page-server client (see client.h).  One I/O thread owns the sockets
 * and the lists of requests in flight; submitters only append to the
 * queues under the lock and wake it through an eventfd.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "plugin/log/log.h"
#include "plugin/transport/answer.h"
#include "plugin/transport/client.h"

#define OUT_HDRS       64 /* headers buffered per connection */
#define BACKOFF_MIN_MS 20
#define BACKOFF_MAX_MS 2000
#define CONNECT_MS     3000
#define READ_BUDGET    (256U << 10)
#define HOLD_MS	       2 /* an urgent answer due: the bulk stream waits this long at most */
#define ERR_LEN	       512
#define MSG_LEN	       (ERR_LEN + 96)

struct preq {
	struct preq *next;
	struct psa_req r; /* what is still wanted */
	uint32_t pid, nr_pages;
	uint64_t vaddr; /* as submitted, for the completion */
	bool urgent;
	psc_done_fn done;
	void *arg;
};

struct fifo {
	struct preq *head, *tail;
};

enum { BULK, URGENT, NR_CONNS };

struct conn {
	struct lr_io io; /* io.sk < 0: down */
	struct fifo inflight;
	uint32_t inflight_pages;
	uint8_t out[OUT_HDRS * PS_HDR_MAX];
	size_t out_len, out_off;
	struct psa rx;
	uint64_t last_rx_ms; /* last byte received, or when answers became due */
	uint64_t retry_at_ms, down_since_ms;
	unsigned backoff_ms;
};

struct psc {
	struct psc_opts o;
	char peer[96];
	struct lr_tls_creds *creds;
	struct conn conn[NR_CONNS];
	unsigned nr_conns;
	bool probed; /* urgent_auto: the second connection was tried */
	bool local;  /* atomic: the server is on this host (its CPUs are ours) */
	pthread_t thread;
	int wake;
	pthread_mutex_t lock;
	/*
	 * urgent_polled: conn[URGENT] belongs to whoever holds ulock (the
	 * submitting and polling thread, or the I/O thread making it or finding
	 * it stalled); never taken with lock held, and no done() runs under it.
	 */
	pthread_mutex_t ulock;
	unsigned ugen;		     /* under ulock: bumped each time conn[URGENT] comes up */
	bool urg_due;		     /* atomic: polled urgent answers due (the bulk stream is held) */
	bool reprobe;		     /* I/O thread: the polled urgent connection was lost, make it again */
	uint64_t reprobe_at;	     /* I/O thread */
	unsigned reprobe_ms;	     /* I/O thread: its backoff */
	struct fifo queue[NR_CONNS]; /* background, urgent: not yet sent; under lock */
	bool stopping, failed;	     /* under lock */
	char fail_why[MSG_LEN];
	struct psc_stats st; /* under lock */
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void fifo_push(struct fifo *f, struct preq *r)
{
	r->next = NULL;
	if (f->tail)
		f->tail->next = r;
	else
		f->head = r;
	f->tail = r;
}

static struct preq *fifo_pop(struct fifo *f)
{
	struct preq *r = f->head;

	if (r) {
		f->head = r->next;
		if (!f->head)
			f->tail = NULL;
	}
	return r;
}

/* Put all of src, in order, ahead of dst. */
static void fifo_prepend(struct fifo *dst, struct fifo *src)
{
	if (!src->head)
		return;
	src->tail->next = dst->head;
	if (!dst->tail)
		dst->tail = src->tail;
	dst->head = src->head;
	*src = (struct fifo){NULL, NULL};
}

static void wake(struct psc *c)
{
	uint64_t one = 1;

	if (write(c->wake, &one, sizeof(one)) < 0 && errno != EAGAIN) {
		/* the counter cannot overflow in practice; the thread also polls with a timeout */
	}
}

/* ---- connecting ---------------------------------------------------------- */

static int tcp_connect(struct psc *c, char *err, size_t errlen)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res, *ai;
	char port[16], why[200];
	int sk = -1, rc, one = 1, saved = 0;

	snprintf(port, sizeof(port), "%d", c->o.port);
	rc = getaddrinfo(c->o.host, port, &hints, &res);
	if (rc) {
		snprintf(err, errlen, "peer %s: %s", c->peer, gai_strerror(rc));
		return -1;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		struct timeval tv = {.tv_sec = CONNECT_MS / 1000};

		sk = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (sk < 0) {
			saved = errno;
			continue;
		}
		/* connect(2) and the TLS handshake are bounded by these */
		setsockopt(sk, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		setsockopt(sk, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		if (connect(sk, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		saved = errno;
		close(sk);
		sk = -1;
	}
	freeaddrinfo(res);
	if (sk < 0) {
		snprintf(err, errlen, "peer %s: connect: %s", c->peer, strerror(saved));
		return -1;
	}
	setsockopt(sk, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* requests paced by bbr to a server on this host would wait on its timers */
	if (lr_io_congestion(sk, NULL, why, sizeof(why)))
		pr_debug("peer %s: %s", c->peer, why);
	return sk;
}

/* Connect k (blocking, bounded), handshake, then make it non-blocking. */
static int conn_up(struct psc *c, struct conn *k, char *err, size_t errlen)
{
	struct timeval zero = {0, 0};
	char why[ERR_LEN];
	int sk = tcp_connect(c, err, errlen);

	if (sk < 0)
		return -1;
	k->io = (struct lr_io){.sk = sk};
	__atomic_store_n(&c->local, lr_io_peer_is_local(sk), __ATOMIC_RELAXED);
	if (c->creds && lr_io_tls_start(&k->io, c->creds, false, c->o.tls->no_cn_verify ? NULL : c->o.host, CONNECT_MS,
					why, sizeof(why))) {
		snprintf(err, errlen, "peer %s: %s", c->peer, why);
		lr_io_close(&k->io, false);
		return -1;
	}
	setsockopt(sk, SOL_SOCKET, SO_SNDTIMEO, &zero, sizeof(zero));
	setsockopt(sk, SOL_SOCKET, SO_RCVTIMEO, &zero, sizeof(zero));
	fcntl(sk, F_SETFL, fcntl(sk, F_GETFL) | O_NONBLOCK);
	psa_init(&k->rx, c->o.wire);
	k->out_len = k->out_off = 0;
	k->inflight_pages = 0;
	k->backoff_ms = 0;
	return 0;
}

/* ---- completing ---------------------------------------------------------- */

static void complete(struct preq *r, int status, const char *err)
{
	r->done(r->arg, status, r->pid, r->vaddr, r->nr_pages, err);
	free(r);
}

static void fail_list(struct psc *c, struct preq *r, const char *why)
{
	while (r) {
		struct preq *next = r->next;
		char err[MSG_LEN + 160];

		snprintf(err, sizeof(err), "pid %u page %#llx (%u pages) not served: %s", r->pid,
			 (unsigned long long)r->r.vaddr, r->r.left, why);
		complete(r, -1, err);
		r = next;
	}
}

/* The client cannot go on: every request outstanding completes with -1. */
static void fail_all(struct psc *c, const char *why)
{
	struct preq *lists[NR_CONNS * 2];
	unsigned n = 0;

	/* in flight first: the head of a connection is the GET whose answer failed */
	for (unsigned i = 0; i < NR_CONNS; i++) {
		bool polled = i == URGENT && c->o.urgent_polled;

		if (polled)
			pthread_mutex_lock(&c->ulock);
		lists[n++] = c->conn[i].inflight.head;
		c->conn[i].inflight = (struct fifo){NULL, NULL};
		c->conn[i].inflight_pages = 0;
		if (polled) {
			__atomic_store_n(&c->urg_due, false, __ATOMIC_RELAXED);
			pthread_mutex_unlock(&c->ulock);
		}
	}
	pthread_mutex_lock(&c->lock);
	if (!c->failed) {
		c->failed = true;
		snprintf(c->fail_why, sizeof(c->fail_why), "%s", why);
	}
	for (unsigned i = 0; i < NR_CONNS; i++) {
		lists[n++] = c->queue[i].head;
		c->queue[i] = (struct fifo){NULL, NULL};
	}
	pthread_mutex_unlock(&c->lock);
	for (unsigned i = 0; i < n; i++)
		fail_list(c, lists[i], why);
}

/*
 * k is lost (reset, EOF, stall): what it had in flight goes back to the
 * front of its queues, in order, to be sent again once a connection is up.
 */
static void conn_lost(struct psc *c, struct conn *k, const char *why)
{
	struct fifo back[NR_CONNS] = {{NULL, NULL}, {NULL, NULL}};
	struct preq *r;

	lr_io_close(&k->io, false);
	while ((r = fifo_pop(&k->inflight)))
		fifo_push(&back[r->urgent], r);
	k->inflight_pages = 0;
	if (!c->o.reconnect) {
		char msg[MSG_LEN];

		for (unsigned i = 0; i < NR_CONNS; i++)
			fifo_prepend(&k->inflight, &back[i]);
		snprintf(msg, sizeof(msg), "%s (reconnecting is off)", why);
		fail_all(c, msg);
		return;
	}
	pthread_mutex_lock(&c->lock);
	for (unsigned i = 0; i < NR_CONNS; i++)
		fifo_prepend(&c->queue[i], &back[i]);
	c->st.reconnects++;
	pthread_mutex_unlock(&c->lock);
	k->down_since_ms = now_ms();
	k->backoff_ms = BACKOFF_MIN_MS;
	k->retry_at_ms = k->down_since_ms + k->backoff_ms;
	pr_warn("page-server client: %s; reconnecting", why);
}

static void try_reconnect(struct psc *c, struct conn *k)
{
	char err[ERR_LEN];
	uint64_t t = now_ms();

	if (t < k->retry_at_ms)
		return;
	if (conn_up(c, k, err, sizeof(err)) == 0)
		return;
	if (t - k->down_since_ms >= c->o.retry_ms) {
		char msg[MSG_LEN];

		snprintf(msg, sizeof(msg), "%s (gave up after %u ms)", err, c->o.retry_ms);
		fail_all(c, msg);
		return;
	}
	k->backoff_ms = k->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : k->backoff_ms * 2;
	k->retry_at_ms = t + k->backoff_ms;
}

/* ---- the polled urgent connection (urgent_polled) ------------------------ */

/*
 * The answer (pages) to the head of k's inflight is in: popped and counted;
 * true if whole, else what it still wants is the rest (to be asked again).
 */
static bool take_answer(struct psc *c, struct conn *k, uint32_t pages)
{
	struct preq *r = fifo_pop(&k->inflight);
	bool whole = pages == r->r.left;

	k->inflight_pages -= r->r.left;
	pthread_mutex_lock(&c->lock);
	c->st.answers++;
	c->st.pages += pages;
	c->st.bytes += (uint64_t)pages * PSA_PAGE_SIZE;
	c->st.short_answers += !whole;
	pthread_mutex_unlock(&c->lock);
	if (!whole) {
		r->r.left -= pages;
		r->r.vaddr += (uint64_t)pages * PSA_PAGE_SIZE;
		r->r.dest += (size_t)pages * PSA_PAGE_SIZE;
	}
	return whole;
}

/* I/O thread: connect it outside ulock (handshake included), then hand it over. */
static int urg_make(struct psc *c, char *err, size_t errlen)
{
	struct conn *k = malloc(sizeof(*k));

	if (!k) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	*k = (struct conn){.io = {.sk = -1}};
	if (conn_up(c, k, err, errlen)) {
		free(k);
		return -1;
	}
	pthread_mutex_lock(&c->ulock);
	c->conn[URGENT] = *k;
	c->ugen++;
	pthread_mutex_unlock(&c->ulock);
	free(k);
	return 0;
}

/* ulock held: close it; what it had in flight, in order, is the caller's (urg_requeue). */
static struct preq *urg_down_locked(struct psc *c)
{
	struct conn *k = &c->conn[URGENT];
	struct preq *list = k->inflight.head;

	lr_io_close(&k->io, false);
	k->io.sk = -1;
	k->inflight = (struct fifo){NULL, NULL};
	k->inflight_pages = 0;
	__atomic_store_n(&c->urg_due, false, __ATOMIC_RELAXED);
	return list;
}

/*
 * No lock held: the urgent connection was lost; its requests go first on the
 * bulk connection (the I/O thread's), which fails or reconnects as it does.
 */
static void urg_requeue(struct psc *c, struct preq *list, const char *why)
{
	struct fifo f = {NULL, NULL};

	while (list) {
		struct preq *next = list->next;

		fifo_push(&f, list);
		list = next;
	}
	pthread_mutex_lock(&c->lock);
	if (c->failed) {
		/* fail_all has drained the queues: nobody would read them again */
		pthread_mutex_unlock(&c->lock);
		fail_list(c, f.head, why);
		return;
	}
	fifo_prepend(&c->queue[URGENT], &f);
	c->reprobe = c->o.reconnect; /* the I/O thread reads it only, under lock */
	c->st.reconnects += c->o.reconnect;
	pthread_mutex_unlock(&c->lock);
	pr_warn("page-server client: urgent connection: %s; its requests go on the bulk one", why);
	wake(c);
}

/* ulock held: the GET for what r still wants, whole (a 24/32-byte header; no room means a stalled peer). */
static int urg_send(struct psc *c, struct preq *r, char *why, size_t len)
{
	struct conn *k = &c->conn[URGENT];
	struct ps_iov h = {PS_IOV_GET, r->r.left, r->r.vaddr, r->r.pid};
	uint8_t buf[PS_HDR_MAX];
	size_t n = ps_hdr_encode(c->o.wire, &h, buf);
	char err[ERR_LEN - 160];
	ssize_t w = lr_io_send(&k->io, buf, n, err, sizeof(err));

	if (w != (ssize_t)n) {
		snprintf(why, len, "peer %s: offset %llu: %s", c->peer, (unsigned long long)k->rx.off,
			 w < 0 && errno != EAGAIN ? err : "no room for a request header (peer stalled)");
		return -1;
	}
	if (!k->inflight.head)
		__atomic_store_n(&k->last_rx_ms, now_ms(), __ATOMIC_RELAXED);
	fifo_push(&k->inflight, r);
	k->inflight_pages += r->r.left;
	__atomic_store_n(&c->urg_due, true, __ATOMIC_RELAXED);
	pthread_mutex_lock(&c->lock);
	c->st.requests++;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/*
 * ulock held: read what the urgent connection has; whole answers go to done
 * (completed by the caller after unlocking), the rest of a short one is asked
 * again on it.  0, -1 lost (why), -2 protocol error (why: fatal).
 */
static int urg_read(struct psc *c, struct fifo *done, char *why, size_t len)
{
	struct conn *k = &c->conn[URGENT];

	for (;;) {
		struct preq *r = k->inflight.head;
		size_t want;
		void *buf = psa_want(&k->rx, r ? &r->r : NULL, &want);
		uint32_t pages;
		char err[ERR_LEN - 160];
		ssize_t n = lr_io_recv(&k->io, buf, want, err, sizeof(err));

		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n <= 0) {
			snprintf(why, len, "peer %s: offset %llu: %s", c->peer, (unsigned long long)k->rx.off,
				 n < 0 ? err : "connection closed");
			return -1;
		}
		__atomic_store_n(&k->last_rx_ms, now_ms(), __ATOMIC_RELAXED);
		switch (psa_got(&k->rx, r ? &r->r : NULL, (size_t)n, &pages, err, sizeof(err))) {
		case PSA_ERROR:
			snprintf(why, len, "peer %s: %s", c->peer, err);
			return -2;
		case PSA_ANSWER:
			if (take_answer(c, k, pages)) {
				fifo_push(done, r);
			} else {
				if (urg_send(c, r, why, len)) {
					fifo_push(&k->inflight, r); /* requeued with the rest */
					return -1;
				}
			}
			__atomic_store_n(&c->urg_due, k->inflight.head != NULL, __ATOMIC_RELAXED);
			break;
		}
	}
}

/* I/O thread: a stalled polled urgent connection is lost; a lost one is made again. */
static void urg_watch(struct psc *c)
{
	struct conn *k = &c->conn[URGENT];
	struct preq *list = NULL;
	char why[ERR_LEN];
	bool reprobe;

	pthread_mutex_lock(&c->ulock);
	if (k->io.sk >= 0 && k->inflight.head && now_ms() - k->last_rx_ms > c->o.stall_ms) {
		snprintf(why, sizeof(why), "peer %s: offset %llu: no byte for %u ms with answers due", c->peer,
			 (unsigned long long)k->rx.off, c->o.stall_ms);
		list = urg_down_locked(c);
		pthread_mutex_unlock(&c->ulock);
		urg_requeue(c, list, why);
		return;
	}
	pthread_mutex_unlock(&c->ulock);
	pthread_mutex_lock(&c->lock);
	reprobe = c->reprobe;
	pthread_mutex_unlock(&c->lock);
	if (!reprobe || c->conn[BULK].io.sk < 0 || now_ms() < c->reprobe_at)
		return;
	if (urg_make(c, why, sizeof(why)) == 0) {
		pthread_mutex_lock(&c->lock);
		c->reprobe = false;
		pthread_mutex_unlock(&c->lock);
		c->reprobe_ms = 0;
		pr_info("page-server client: peer %s: the urgent connection is back", c->peer);
		return;
	}
	c->reprobe_ms = c->reprobe_ms ? c->reprobe_ms * 2 : BACKOFF_MIN_MS;
	if (c->reprobe_ms > BACKOFF_MAX_MS)
		c->reprobe_ms = BACKOFF_MAX_MS;
	c->reprobe_at = now_ms() + c->reprobe_ms;
}

/*
 * urgent_auto, after the first answer: a second connection for urgent
 * requests, or, refused, the knowledge that the server takes one only.
 */
static void probe_second(struct psc *c)
{
	char err[ERR_LEN];
	uint64_t answers;

	pthread_mutex_lock(&c->lock);
	answers = c->st.answers;
	pthread_mutex_unlock(&c->lock);
	if (c->probed || !answers)
		return;
	c->probed = true;
	if (c->o.urgent_polled) {
		if (urg_make(c, err, sizeof(err)) == 0) {
			pr_info(
			    "page-server client: peer %s: a second connection for urgent requests, "
			    "read by the faulting thread%s",
			    c->peer,
			    __atomic_load_n(&c->local, __ATOMIC_RELAXED)
				? "; the server is on this host: the bulk stream waits while an urgent answer is due"
				: "");
			return;
		}
	} else if (conn_up(c, &c->conn[URGENT], err, sizeof(err)) == 0) {
		c->nr_conns = 2;
		pr_info("page-server client: peer %s: a second connection for urgent requests", c->peer);
		return;
	}
	c->o.reconnect = false;
	pr_info("page-server client: %s: the server takes one connection (criu dump --lazy-pages?): "
		"urgent requests go first on it, and a lost connection can't be made again",
		err);
}

/* ---- sending ------------------------------------------------------------- */

/* Move queued requests onto k's output while it has room (and, for bulk, window). */
static void conn_fill(struct psc *c, struct conn *k, struct fifo *q, bool windowed)
{
	size_t hs = ps_hdr_size(c->o.wire);

	if (k->out_off == k->out_len)
		k->out_off = k->out_len = 0;
	while (q->head && k->out_len + hs <= sizeof(k->out)) {
		struct preq *r = q->head;
		struct ps_iov h = {PS_IOV_GET, r->r.left, r->r.vaddr, r->r.pid};

		if (windowed && k->inflight_pages && k->inflight_pages + r->r.left > c->o.window_pages)
			break;
		fifo_pop(q);
		if (!k->inflight.head)
			k->last_rx_ms = now_ms(); /* the stall clock starts when an answer is first due */
		fifo_push(&k->inflight, r);
		k->inflight_pages += r->r.left;
		k->out_len += ps_hdr_encode(c->o.wire, &h, k->out + k->out_len);
		c->st.requests++;
	}
}

static void fill_all(struct psc *c)
{
	struct conn *bulk = &c->conn[BULK], *urg = &c->conn[URGENT];

	pthread_mutex_lock(&c->lock);
	if (c->nr_conns > 1 && urg->io.sk >= 0)
		conn_fill(c, urg, &c->queue[URGENT], false);
	if (bulk->io.sk >= 0) {
		/* no urgent connection: urgent requests first, ahead of every queued background one */
		if (c->nr_conns == 1 || urg->io.sk < 0)
			conn_fill(c, bulk, &c->queue[URGENT], false);
		conn_fill(c, bulk, &c->queue[BULK], true);
	}
	pthread_mutex_unlock(&c->lock);
}

/* 0, or -1: k is lost (why says so). */
static int conn_flush(struct psc *c, struct conn *k, char *why, size_t len)
{
	while (k->out_off < k->out_len) {
		char err[ERR_LEN - 160];
		ssize_t w = lr_io_send(&k->io, k->out + k->out_off, k->out_len - k->out_off, err, sizeof(err));

		if (w < 0 && errno == EAGAIN)
			return 0;
		if (w < 0) {
			snprintf(why, len, "peer %s: offset %llu: %s", c->peer, (unsigned long long)k->rx.off, err);
			return -1;
		}
		k->out_off += (size_t)w;
	}
	return 0;
}

/* ---- receiving ----------------------------------------------------------- */

/* The answer to the head of k's inflight is in: complete it, or ask the rest again. */
static void answered(struct psc *c, struct conn *k, uint32_t pages)
{
	struct preq *r = k->inflight.head;
	bool whole = take_answer(c, k, pages);

	pthread_mutex_lock(&c->lock);
	if (!whole) {
		/* a short answer (the protocol allows it): the rest goes first again */
		struct fifo one = {NULL, NULL};

		fifo_push(&one, r);
		fifo_prepend(&c->queue[r->urgent], &one);
	}
	pthread_mutex_unlock(&c->lock);
	if (whole)
		complete(r, 0, NULL);
}

/*
 * Read what k has, up to READ_BUDGET bytes (so that the other connection's
 * urgent answer is not held up behind a long stream); 0, -1 lost (why),
 * -2 protocol error (why: fatal).
 */
static int conn_read(struct psc *c, struct conn *k, char *why, size_t len)
{
	for (size_t budget = READ_BUDGET; budget;) {
		struct psa_req *head = k->inflight.head ? &k->inflight.head->r : NULL;
		size_t want;
		void *buf = psa_want(&k->rx, head, &want);
		uint32_t pages;
		char err[ERR_LEN - 160];
		ssize_t n = lr_io_recv(&k->io, buf, want < budget ? want : budget, err, sizeof(err));

		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n < 0) {
			snprintf(why, len, "peer %s: offset %llu: %s", c->peer, (unsigned long long)k->rx.off, err);
			return -1;
		}
		if (n == 0) {
			snprintf(why, len, "peer %s: offset %llu: connection closed%s", c->peer,
				 (unsigned long long)k->rx.off, head ? " with answers due" : "");
			return -1;
		}
		k->last_rx_ms = now_ms();
		budget -= (size_t)n;
		switch (psa_got(&k->rx, head, (size_t)n, &pages, err, sizeof(err))) {
		case PSA_ERROR:
			snprintf(why, len, "peer %s: %s", c->peer, err);
			return -2;
		case PSA_ANSWER:
			answered(c, k, pages);
			break;
		}
	}
	return 0;
}

/*
 * A send to k failed (why): a peer that closed on us may have said why first,
 * in answers still unread (a wrong one is the error to report, not the
 * broken pipe it left).  -2 with why replaced if so, else -1.
 */
static int said_why(struct psc *c, struct conn *k, char *why, size_t len)
{
	char said[ERR_LEN];

	if (conn_read(c, k, said, sizeof(said)) != -2)
		return -1;
	snprintf(why, len, "%s", said);
	return -2;
}

/* ---- the I/O thread ------------------------------------------------------ */

static bool idle(struct psc *c)
{
	bool q;

	pthread_mutex_lock(&c->lock);
	q = !c->queue[BULK].head && !c->queue[URGENT].head;
	pthread_mutex_unlock(&c->lock);
	return q && !c->conn[BULK].inflight.head && !c->conn[URGENT].inflight.head;
}

static void *io_thread(void *arg)
{
	struct psc *c = arg;

	for (;;) {
		struct pollfd p[NR_CONNS + 1];
		struct conn *which[NR_CONNS + 1];
		unsigned n = 0;
		int timeout = 200;
		bool stop, failed;

		pthread_mutex_lock(&c->lock);
		stop = c->stopping;
		failed = c->failed;
		pthread_mutex_unlock(&c->lock);
		if (stop || failed)
			break;
		for (unsigned i = 0; i < c->nr_conns; i++)
			if (c->conn[i].io.sk < 0)
				try_reconnect(c, &c->conn[i]);
		if (c->o.urgent_auto && !c->probed && c->conn[BULK].io.sk >= 0)
			probe_second(c);
		if (c->o.urgent_polled && c->probed)
			urg_watch(c);
		fill_all(c);
		p[n] = (struct pollfd){.fd = c->wake, .events = POLLIN};
		which[n++] = NULL;
		/*
		 * An urgent answer due from a server on this host: the bulk stream
		 * is not read meanwhile (for HOLD_MS at most), so that its sender
		 * and this thread leave the CPUs to the server's urgent reply.  A
		 * remote server's CPUs are not ours, and holding would idle the
		 * path (no answer completes, so no request follows) for as long.
		 */
		struct conn *urg = &c->conn[URGENT], *bulk = &c->conn[BULK];
		bool local = __atomic_load_n(&c->local, __ATOMIC_RELAXED);
		bool hold = local && c->nr_conns > 1 && urg->io.sk >= 0 && urg->inflight.head &&
			    now_ms() - urg->last_rx_ms < HOLD_MS;
		if (local && c->o.urgent_polled && __atomic_load_n(&c->urg_due, __ATOMIC_RELAXED)) {
			/* read without ulock: a stale value costs one round of HOLD_MS at most */
			uint64_t since = __atomic_load_n(&urg->last_rx_ms, __ATOMIC_RELAXED);

			hold = now_ms() - since < HOLD_MS;
		}
		if (hold) {
			timeout = 1;
			bulk->last_rx_ms = now_ms(); /* not a stall of the peer's */
		}
		/* the urgent connection first */
		for (unsigned i = c->nr_conns; i-- > 0;) {
			struct conn *k = &c->conn[i];
			bool in = !(hold && k == bulk);

			if (k->io.sk < 0) {
				timeout = 10;
				continue;
			}
			if (in && lr_io_pending(&k->io))
				timeout = 0;
			p[n] = (struct pollfd){.fd = k->io.sk,
					       .events = (in ? POLLIN : 0) | (k->out_off < k->out_len ? POLLOUT : 0)};
			which[n++] = k;
		}
		if (poll(p, n, timeout) < 0 && errno != EINTR) {
			fail_all(c, "the client's poll failed");
			break;
		}
		if (p[0].revents & POLLIN) {
			uint64_t v;

			if (read(c->wake, &v, sizeof(v)) < 0) {
				/* EAGAIN: another wake already consumed */
			}
		}
		for (unsigned i = 1; i < n; i++) {
			struct conn *k = which[i];
			char why[ERR_LEN];
			int r = 0;

			if (p[i].revents & POLLOUT || k->out_off < k->out_len)
				r = conn_flush(c, k, why, sizeof(why));
			if (r)
				r = said_why(c, k, why, sizeof(why));
			else if (!(hold && k == bulk) &&
				 (p[i].revents & (POLLIN | POLLERR | POLLHUP) || lr_io_pending(&k->io)))
				r = conn_read(c, k, why, sizeof(why));
			if (!r && k->inflight.head && now_ms() - k->last_rx_ms > c->o.stall_ms) {
				snprintf(why, sizeof(why), "peer %s: offset %llu: no byte for %u ms with answers due",
					 c->peer, (unsigned long long)k->rx.off, c->o.stall_ms);
				r = -1;
			}
			if (r == -2) {
				fail_all(c, why);
				break;
			}
			if (r == -1)
				conn_lost(c, k, why);
		}
	}
	return NULL;
}

/* ---- the API ------------------------------------------------------------- */

struct psc *psc_open(const struct psc_opts *o, char *err, size_t errlen)
{
	struct psc *c = calloc(1, sizeof(*c));
	int rc;

	if (!c) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	c->o = *o;
	if (!c->o.window_pages)
		c->o.window_pages = 4096;
	if (!c->o.stall_ms)
		c->o.stall_ms = 10000;
	if (!c->o.retry_ms)
		c->o.retry_ms = 30000;
	snprintf(c->peer, sizeof(c->peer), "%.80s:%d", o->host, o->port);
	c->nr_conns = o->urgent_channel && !o->urgent_auto && !o->urgent_polled ? 2 : 1;
	for (unsigned i = 0; i < NR_CONNS; i++)
		c->conn[i].io = (struct lr_io){.sk = -1};
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->ulock, NULL);
	c->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->wake < 0) {
		snprintf(err, errlen, "eventfd: %s", strerror(errno));
		goto fail;
	}
	if (o->tls && o->tls->on && !(c->creds = lr_tls_creds_load(o->tls, err, errlen)))
		goto fail;
	for (unsigned i = 0; i < c->nr_conns; i++)
		if (conn_up(c, &c->conn[i], err, errlen))
			goto fail;
	if (o->urgent_polled && o->urgent_channel && !o->urgent_auto) {
		if (conn_up(c, &c->conn[URGENT], err, errlen))
			goto fail;
		c->probed = true;
	}
	rc = pthread_create(&c->thread, NULL, io_thread, c);
	if (rc) {
		snprintf(err, errlen, "cannot start the client thread: %s", strerror(rc));
		goto fail;
	}
	return c;
fail:
	for (unsigned i = 0; i < NR_CONNS; i++)
		lr_io_close(&c->conn[i].io, false);
	if (c->wake >= 0)
		close(c->wake);
	lr_tls_creds_free(c->creds);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->ulock);
	free(c);
	return NULL;
}

static bool submit_polled(struct psc *c, struct preq *r);

/* lock held: the client failed or is closing, so r is not taken (err says why). */
static bool refused_locked(struct psc *c, const struct preq *r, char *err, size_t errlen)
{
	if (!c->failed && !c->stopping)
		return false;
	snprintf(err, errlen, "pid %u page %#llx (%u pages) not served: %s", r->pid, (unsigned long long)r->vaddr,
		 r->nr_pages, c->failed ? c->fail_why : "the client is closing");
	return true;
}

/* As refused_locked, taking the lock; r is freed if refused. */
static bool refused(struct psc *c, struct preq *r, char *err, size_t errlen)
{
	bool no;

	pthread_mutex_lock(&c->lock);
	no = refused_locked(c, r, err, errlen);
	pthread_mutex_unlock(&c->lock);
	if (no)
		free(r);
	return no;
}

int psc_submit(struct psc *c, uint32_t pid, uint64_t vaddr, uint32_t nr_pages, void *dest, unsigned flags,
	       psc_done_fn done, void *arg, char *err, size_t errlen)
{
	struct preq *r;

	if (!nr_pages || (vaddr & (PSA_PAGE_SIZE - 1)) || !pid || pid > INT32_MAX || !dest || !done) {
		snprintf(err, errlen, "bad request: pid %u %#llx %u pages", pid, (unsigned long long)vaddr, nr_pages);
		return -1;
	}
	r = malloc(sizeof(*r));
	if (!r) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	*r = (struct preq){.r = {pid, nr_pages, vaddr, dest},
			   .pid = pid,
			   .nr_pages = nr_pages,
			   .vaddr = vaddr,
			   .urgent = flags & PSC_URGENT,
			   .done = done,
			   .arg = arg};
	if (refused(c, r, err, errlen))
		return -1;
	if (r->urgent && (flags & PSC_POLLED) && c->o.urgent_polled && submit_polled(c, r))
		return 0;
	/*
	 * Checked again in the same locked section as the push: fail_all may
	 * have drained the queues since, and the I/O thread then reads them no
	 * more (a request pushed after it would never complete).
	 */
	pthread_mutex_lock(&c->lock);
	if (refused_locked(c, r, err, errlen)) {
		pthread_mutex_unlock(&c->lock);
		free(r);
		return -1;
	}
	fifo_push(&c->queue[r->urgent ? URGENT : BULK], r);
	pthread_mutex_unlock(&c->lock);
	wake(c);
	return 0;
}

/*
 * r out on the polled urgent connection, by the calling thread: true, or
 * false if it is not up (r then goes the I/O thread's way).
 */
static bool submit_polled(struct psc *c, struct preq *r)
{
	struct preq *list;
	char why[ERR_LEN];

	pthread_mutex_lock(&c->ulock);
	if (c->conn[URGENT].io.sk < 0) {
		pthread_mutex_unlock(&c->ulock);
		return false;
	}
	if (urg_send(c, r, why, sizeof(why)) == 0) {
		pthread_mutex_unlock(&c->ulock);
		return true;
	}
	list = urg_down_locked(c);
	pthread_mutex_unlock(&c->ulock);
	urg_requeue(c, list, why);
	return false;
}

int psc_urgent_fd(struct psc *c, unsigned *gen)
{
	int fd;

	pthread_mutex_lock(&c->ulock);
	fd = c->conn[URGENT].io.sk;
	*gen = c->ugen;
	pthread_mutex_unlock(&c->ulock);
	return c->o.urgent_polled ? fd : -1;
}

void psc_poll(struct psc *c)
{
	struct fifo done = {NULL, NULL};
	struct preq *lost = NULL, *r;
	char why[ERR_LEN];
	int rc = 0;

	if (!c->o.urgent_polled)
		return;
	pthread_mutex_lock(&c->ulock);
	if (c->conn[URGENT].io.sk >= 0)
		rc = urg_read(c, &done, why, sizeof(why));
	if (rc == -1)
		lost = urg_down_locked(c);
	pthread_mutex_unlock(&c->ulock);
	while ((r = fifo_pop(&done)))
		complete(r, 0, NULL);
	if (rc == -1)
		urg_requeue(c, lost, why);
	if (rc == -2) {
		fail_all(c, why);
		wake(c); /* the I/O thread sees the failure and ends */
	}
}

void psc_get_stats(struct psc *c, struct psc_stats *st)
{
	pthread_mutex_lock(&c->lock);
	*st = c->st;
	pthread_mutex_unlock(&c->lock);
}

/* PS_IOV_CLOSE on an idle connection and the server's 4-byte status. */
static int say_close(struct psc *c, struct conn *k)
{
	struct ps_iov h = {.cmd = PS_IOV_CLOSE};
	uint8_t buf[PS_HDR_MAX];
	size_t len = ps_hdr_encode(c->o.wire, &h, buf), got = 0;
	int32_t status = -1;
	uint64_t deadline = now_ms() + c->o.stall_ms;
	char why[ERR_LEN];

	if (k->io.sk < 0 || k->inflight.head)
		return -1;
	for (size_t off = 0; off < len;) {
		ssize_t w = lr_io_send(&k->io, buf + off, len - off, why, sizeof(why));

		if (w < 0 && (errno != EAGAIN || now_ms() > deadline))
			return -1;
		if (w < 0)
			poll(&(struct pollfd){.fd = k->io.sk, .events = POLLOUT}, 1, 50);
		else
			off += (size_t)w;
	}
	while (got < sizeof(status)) {
		ssize_t r = lr_io_recv(&k->io, (char *)&status + got, sizeof(status) - got, why, sizeof(why));

		if (r == 0 || (r < 0 && (errno != EAGAIN || now_ms() > deadline)))
			return -1;
		if (r < 0)
			poll(&(struct pollfd){.fd = k->io.sk, .events = POLLIN}, 1, 50);
		else
			got += (size_t)r;
	}
	return status == 0 ? 0 : -1;
}

int psc_close(struct psc *c)
{
	int ret = 0;

	pthread_mutex_lock(&c->lock);
	c->stopping = true;
	pthread_mutex_unlock(&c->lock);
	wake(c);
	pthread_join(c->thread, NULL);
	if (!idle(c))
		ret = -1;
	char why[MSG_LEN];

	snprintf(why, sizeof(why), "peer %s: the client was closed first", c->peer);
	fail_all(c, why);
	for (unsigned i = 0; i < NR_CONNS; i++) {
		struct conn *k = &c->conn[i];

		if (i >= c->nr_conns && !(c->o.urgent_polled && k->io.sk >= 0))
			continue;
		if (ret == 0 && say_close(c, k))
			ret = -1;
		lr_io_close(&k->io, ret == 0);
	}
	close(c->wake);
	lr_tls_creds_free(c->creds);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->ulock);
	free(c);
	return ret;
}

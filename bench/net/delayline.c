// SPDX-License-Identifier: MIT
/*
 * delayline: a link of given rate and delay between two network namespaces,
 * for bench/net (this kernel has no sch_netem).
 *
 *   delayline --ns-a NS --ns-b NS --dev NAME --delay-us ONE_WAY
 *             [--rate BITS_PER_S] [--queue fifo|fair] [--limit BYTES] [--mtu N]
 *
 * Makes a TUN device NAME in each namespace (the caller gives them addresses
 * and brings them up) and moves every IP packet read from one to the other,
 * each direction by a thread of its own, as a link would:
 *   queue      packets wait for the link in a queue of at most LIMIT bytes;
 *              fifo: one queue, a full queue drops the arriving packet;
 *              fair: one queue per flow (TCP/UDP 5-tuple), served by deficit
 *              round robin with a quantum of one MTU, a flow that had nothing
 *              queued first (the sparse-flow rule of Linux's fq_codel, without
 *              its AQM); a full queue drops the head of the longest flow.
 *   rate       a packet occupies the link for len * 8 / RATE (0: no limit);
 *   delay      then arrives ONE_WAY microseconds later on the other side.
 * Prints "ready" once both devices exist; on SIGTERM or SIGINT, the packets
 * and bytes moved and dropped per direction on stderr, then exits (the
 * devices go with it).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define NFLOWS	 1024
#define SMALL	 512	   /* packets up to this size get a small buffer */
#define MAX_HELD (1 << 16) /* packets queued or in flight, per direction */

struct pkt {
	struct pkt *next;
	uint64_t arr; /* ns: when it reached the link's queue */
	uint64_t due; /* ns: when it reaches the other side */
	uint32_t len, cap;
	unsigned char data[];
};

/* packets in arrival order */
struct pktq {
	struct pkt *head, *tail;
};

struct flow {
	struct pktq q;
	uint64_t bytes;
	int32_t deficit;
	int listed; /* 0, or 1 on the new flows' list, 2 on the old flows' */
	struct flow *next;
};

struct dir {
	const char *name;
	int in, out;
	/* the link */
	uint64_t free_at; /* ns: when the packet on the link has left */
	uint64_t qbytes;
	struct flow flows[NFLOWS]; /* fifo uses flows[0] only */
	struct {
		struct flow *head, *tail;
	} lists[2]; /* flows with packets: [0] new, [1] old (flow.listed - 1) */
	/* the wire: serialized packets until they are due, in order */
	struct pktq wire;
	struct pkt *free_big;
	unsigned held;
	/* counters */
	uint64_t pkts, bytes, drops, drop_bytes, write_errs, max_q;
};

static uint64_t rate_bps, delay_ns, limit;
static unsigned mtu = 65000;
static int fair;
static volatile sig_atomic_t stop;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int tun_in(const char *ns, const char *dev)
{
	char path[256];
	struct ifreq ifr;
	int self, nsfd, fd = -1;

	self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "/run/netns/%s", ns);
	nsfd = open(path, O_RDONLY | O_CLOEXEC);
	if (self < 0 || nsfd < 0) {
		fprintf(stderr, "delayline: open %s: %s\n", self < 0 ? "/proc/self/ns/net" : path, strerror(errno));
		goto out;
	}
	if (setns(nsfd, CLONE_NEWNET)) {
		fprintf(stderr, "delayline: setns %s: %s\n", path, strerror(errno));
		goto out;
	}
	fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		fprintf(stderr, "delayline: open /dev/net/tun: %s\n", strerror(errno));
	} else {
		memset(&ifr, 0, sizeof(ifr));
		ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
		snprintf(ifr.ifr_name, IFNAMSIZ, "%s", dev);
		if (ioctl(fd, TUNSETIFF, &ifr)) {
			fprintf(stderr, "delayline: TUNSETIFF %s in %s: %s\n", dev, ns, strerror(errno));
			close(fd);
			fd = -1;
		}
	}
	if (setns(self, CLONE_NEWNET)) {
		fprintf(stderr, "delayline: setns back: %s\n", strerror(errno));
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
out:
	if (self >= 0)
		close(self);
	if (nsfd >= 0)
		close(nsfd);
	return fd;
}

/* the flow of an IPv4 packet: a hash of protocol, addresses and ports */
static unsigned flow_of(const unsigned char *p, uint32_t len)
{
	uint32_t h = 2166136261u, ihl;
	unsigned i, n;

	if (!fair || len < 20 || (p[0] >> 4) != 4)
		return 0;
	ihl = (p[0] & 15) * 4;
	n = (p[9] == 6 || p[9] == 17) && len >= ihl + 4 ? 4 : 0;
	for (i = 12; i < 20; i++)
		h = (h ^ p[i]) * 16777619u;
	h = (h ^ p[9]) * 16777619u;
	for (i = 0; i < n; i++)
		h = (h ^ p[ihl + i]) * 16777619u;
	return h % NFLOWS;
}

static void pkt_free(struct dir *d, struct pkt *p)
{
	d->held--;
	if (p->cap > SMALL) {
		p->next = d->free_big;
		d->free_big = p;
	} else {
		free(p);
	}
}

static void pktq_push(struct pktq *q, struct pkt *p)
{
	p->next = NULL;
	if (q->tail)
		q->tail->next = p;
	else
		q->head = p;
	q->tail = p;
}

static struct pkt *pktq_pop(struct pktq *q)
{
	struct pkt *p = q->head;

	q->head = p->next;
	if (!q->head)
		q->tail = NULL;
	return p;
}

static void flow_list(struct dir *d, struct flow *f, int which)
{
	f->listed = which;
	f->next = NULL;
	if (d->lists[which - 1].tail)
		d->lists[which - 1].tail->next = f;
	else
		d->lists[which - 1].head = f;
	d->lists[which - 1].tail = f;
}

static struct pkt *flow_pop(struct dir *d, struct flow *f)
{
	struct pkt *p = pktq_pop(&f->q);

	f->bytes -= p->len;
	d->qbytes -= p->len;
	return p;
}

/* a full queue: fifo drops the new packet, fair the head of the longest flow */
static int make_room(struct dir *d, struct flow *f, uint32_t len)
{
	struct flow *fat;
	struct pkt *p;
	unsigned i;

	while (d->qbytes + len > limit) {
		if (!fair)
			return -1;
		fat = &d->flows[0];
		for (i = 1; i < NFLOWS; i++)
			if (d->flows[i].bytes > fat->bytes)
				fat = &d->flows[i];
		if (!fat->q.head || (fat == f && fat->bytes < len))
			return -1;
		p = flow_pop(d, fat);
		d->drops++;
		d->drop_bytes += p->len;
		pkt_free(d, p);
	}
	return 0;
}

static void enqueue(struct dir *d, struct pkt *p)
{
	struct flow *f = &d->flows[flow_of(p->data, p->len)];

	if (make_room(d, f, p->len)) {
		d->drops++;
		d->drop_bytes += p->len;
		pkt_free(d, p);
		return;
	}
	pktq_push(&f->q, p);
	f->bytes += p->len;
	d->qbytes += p->len;
	if (d->qbytes > d->max_q)
		d->max_q = d->qbytes;
	if (!f->listed) {
		f->deficit = mtu;
		flow_list(d, f, 1);
	}
}

static struct flow *list_pop(struct dir *d, int which)
{
	struct flow *f = d->lists[which - 1].head;

	d->lists[which - 1].head = f->next;
	if (!f->next)
		d->lists[which - 1].tail = NULL;
	f->listed = 0;
	return f;
}

/* the next packet for the link: deficit round robin, new flows first (as fq_codel) */
static struct pkt *dequeue(struct dir *d)
{
	struct flow *f;
	int which;

	for (;;) {
		if (d->lists[0].head)
			which = 1;
		else if (d->lists[1].head)
			which = 2;
		else
			return NULL;
		f = d->lists[which - 1].head;
		if (f->deficit <= 0) {
			f->deficit += mtu;
			list_pop(d, which);
			flow_list(d, f, 2);
			continue;
		}
		if (!f->q.head) {
			list_pop(d, which);
			/* an emptied new flow passes through the old list once, so it cannot starve them */
			if (which == 1 && d->lists[1].head)
				flow_list(d, f, 2);
			continue;
		}
		f->deficit -= f->q.head->len;
		return flow_pop(d, f);
	}
}

static struct pkt *pkt_read(struct dir *d)
{
	struct pkt *p = d->free_big, *s;
	ssize_t n;

	if (d->held >= MAX_HELD)
		return NULL;
	if (p) {
		d->free_big = p->next;
	} else {
		p = malloc(sizeof(*p) + mtu + 64);
		if (!p)
			return NULL;
		p->cap = mtu + 64;
	}
	n = read(d->in, p->data, p->cap);
	if (n <= 0) {
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			fprintf(stderr, "delayline: %s: read: %s\n", d->name, strerror(errno));
		p->next = d->free_big;
		d->free_big = p;
		return NULL;
	}
	d->held++;
	p->len = n;
	p->arr = now_ns();
	if (n <= SMALL) {
		s = malloc(sizeof(*s) + SMALL);
		if (s) {
			s->cap = SMALL;
			s->len = n;
			s->arr = p->arr;
			memcpy(s->data, p->data, n);
			p->next = d->free_big;
			d->free_big = p;
			return s;
		}
	}
	return p;
}

static void *run(void *arg)
{
	struct dir *d = arg;
	struct pollfd pfd = {.fd = d->in, .events = POLLIN};
	struct timespec ts;
	uint64_t t, next, ser;
	struct pkt *p;
	int i;

	while (!stop) {
		t = now_ns();
		/* what arrived: at most a burst, so the link keeps its pace */
		for (i = 0; i < 64 && (p = pkt_read(d)); i++)
			enqueue(d, p);
		t = now_ns();
		/* onto the link while it is free */
		while (d->free_at <= t && (p = dequeue(d))) {
			ser = rate_bps ? (uint64_t)p->len * 8 * 1000000000ULL / rate_bps : 0;
			/* from when the link was free or the packet came, not from when this thread woke */
			d->free_at = (d->free_at > p->arr ? d->free_at : p->arr) + ser;
			p->due = d->free_at + delay_ns;
			pktq_push(&d->wire, p);
		}
		/* off the wire when due */
		while ((p = d->wire.head) && p->due <= t) {
			pktq_pop(&d->wire);
			if (write(d->out, p->data, p->len) != (ssize_t)p->len)
				d->write_errs++;
			d->pkts++;
			d->bytes += p->len;
			pkt_free(d, p);
		}
		next = UINT64_MAX;
		if (d->wire.head)
			next = d->wire.head->due;
		if (d->qbytes && d->free_at < next)
			next = d->free_at;
		if (i == 64)
			next = t; /* more to read */
		t = now_ns();
		if (next <= t)
			continue;
		if (next != UINT64_MAX) {
			next -= t;
			ts.tv_sec = next / 1000000000ULL;
			ts.tv_nsec = next % 1000000000ULL;
		} else {
			ts.tv_sec = 0;
			ts.tv_nsec = 100000000; /* to see stop */
		}
		if (ppoll(&pfd, 1, &ts, NULL) < 0 && errno != EINTR) {
			fprintf(stderr, "delayline: %s: ppoll: %s\n", d->name, strerror(errno));
			break;
		}
	}
	return NULL;
}

static uint64_t num(const char *s, const char *what)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || v < 0)
		goto bad;
	switch (*end) {
	case 'k':
	case 'K':
		v *= 1e3;
		end++;
		break;
	case 'm':
	case 'M':
		v *= 1e6;
		end++;
		break;
	case 'g':
	case 'G':
		v *= 1e9;
		end++;
		break;
	}
	if (*end)
		goto bad;
	return (uint64_t)v;
bad:
	fprintf(stderr, "delayline: bad %s: %s\n", what, s);
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {{"ns-a", 1, 0, 'a'},     {"ns-b", 1, 0, 'b'}, {"dev", 1, 0, 'd'},
					     {"delay-us", 1, 0, 'D'}, {"rate", 1, 0, 'r'}, {"queue", 1, 0, 'q'},
					     {"limit", 1, 0, 'l'},    {"mtu", 1, 0, 'm'},  {0, 0, 0, 0}};
	static struct dir ab = {.name = "a->b"}, ba = {.name = "b->a"};
	const char *nsa = NULL, *nsb = NULL, *dev = NULL;
	struct sigaction sa = {.sa_handler = on_signal};
	pthread_t t1, t2;
	sigset_t set;
	int c, fa, fb;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'a':
			nsa = optarg;
			break;
		case 'b':
			nsb = optarg;
			break;
		case 'd':
			dev = optarg;
			break;
		case 'D':
			delay_ns = num(optarg, "delay") * 1000;
			break;
		case 'r':
			rate_bps = num(optarg, "rate");
			break;
		case 'l':
			limit = num(optarg, "limit");
			break;
		case 'm':
			mtu = num(optarg, "mtu");
			break;
		case 'q':
			if (strcmp(optarg, "fair") && strcmp(optarg, "fifo")) {
				fprintf(stderr, "delayline: --queue fifo|fair\n");
				return 2;
			}
			fair = !strcmp(optarg, "fair");
			break;
		default:
			fprintf(stderr, "usage: delayline --ns-a NS --ns-b NS --dev NAME --delay-us US [--rate BPS] "
					"[--queue fifo|fair] [--limit BYTES] [--mtu N]\n");
			return 2;
		}
	}
	if (!nsa || !nsb || !dev || mtu < 576 || mtu > 65535) {
		fprintf(stderr, "delayline: --ns-a, --ns-b and --dev are needed; --mtu 576..65535\n");
		return 2;
	}
	if (!limit) /* one bandwidth-delay product of the round trip, at least 64 packets */
		limit = rate_bps ? rate_bps / 8 * delay_ns * 2 / 1000000000ULL : 0;
	if (limit < 64ULL * mtu)
		limit = 64ULL * mtu;
	prctl(PR_SET_TIMERSLACK, 1UL);
	fa = tun_in(nsa, dev);
	fb = fa < 0 ? -1 : tun_in(nsb, dev);
	if (fb < 0)
		return 1;
	ab.in = fa, ab.out = fb, ba.in = fb, ba.out = fa;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (pthread_create(&t1, NULL, run, &ab) || pthread_create(&t2, NULL, run, &ba)) {
		fprintf(stderr, "delayline: pthread_create failed\n");
		return 1;
	}
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	printf("ready: rate %llu bit/s, one-way delay %llu us, %s queue of %llu bytes, mtu %u\n",
	       (unsigned long long)rate_bps, (unsigned long long)delay_ns / 1000, fair ? "fair" : "fifo",
	       (unsigned long long)limit, mtu);
	fflush(stdout);
	while (!stop)
		pause();
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	fprintf(stderr,
		"delayline: a->b %llu packets %llu bytes, %llu dropped (%llu bytes), max queue %llu; "
		"b->a %llu packets %llu bytes, %llu dropped (%llu bytes), max queue %llu\n",
		(unsigned long long)ab.pkts, (unsigned long long)ab.bytes, (unsigned long long)ab.drops,
		(unsigned long long)ab.drop_bytes, (unsigned long long)ab.max_q, (unsigned long long)ba.pkts,
		(unsigned long long)ba.bytes, (unsigned long long)ba.drops, (unsigned long long)ba.drop_bytes,
		(unsigned long long)ba.max_q);
	return 0;
}

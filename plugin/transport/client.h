/* SPDX-License-Identifier: MIT */
/*
 * A page-server client: asynchronous PS_IOV_GETs to `lazyrestore
 * page-server` or `criu dump --lazy-pages` / `criu page-server --lazy-pages`.
 *
 *   c = psc_open(&opts, err, sizeof(err));
 *   psc_submit(c, pid, vaddr, nr_pages, dest, PSC_URGENT, done, arg);   // any thread
 *   ... done(arg, 0, ...) runs on the client's I/O thread once all
 *       nr_pages * 4096 bytes are in dest (several short answers may make them up)
 *   psc_close(c);
 *
 * Many requests are in flight at once.  An urgent request (a fault) goes out
 * ahead of every queued background request; with opts.urgent_channel it has
 * a connection of its own, so it never waits behind a large answer (our
 * page server serves each connection on its own thread; CRIU's serves one
 * connection, so leave it off there).  Every answer is checked against the
 * GET it answers (PS_IOV_ADD_F|PE_PRESENT, same pid and address, 1..asked
 * pages); anything else ends the client with an error naming the peer, the
 * stream offset and the problem, and every outstanding request completes
 * with -1.  A connection reset, EOF or stall (no byte for stall_ms while
 * answers are due) is, with opts.reconnect, survived: the client reconnects
 * with bounded backoff and resends what was outstanding, in order; the
 * bytes of an answer cut short are asked again, never completed half.
 */
#ifndef LAZYRESTORE_TRANSPORT_CLIENT_H
#define LAZYRESTORE_TRANSPORT_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plugin/transport/io.h"
#include "plugin/transport/wire.h"

struct psc;

struct psc_opts {
	const char *host; /* name or address */
	int port;
	enum ps_wire wire;
	bool urgent_channel; /* a second connection for urgent requests */
	/*
	 * Instead of urgent_channel: try the second connection once the first
	 * answer is in (the server has accepted the first by then).  Refused: a
	 * server of one connection (criu dump --lazy-pages closes its listening
	 * socket after accept), so one connection and no reconnect.
	 */
	bool urgent_auto;
	/*
	 * With urgent_channel or urgent_auto: the urgent connection is not the
	 * I/O thread's.  A PSC_URGENT|PSC_POLLED request goes out on it from the
	 * submitting thread, and its answer is read, and done() run, by whoever
	 * calls psc_poll() when psc_urgent_fd() is readable (one thread: the
	 * engine's fault thread), so a fault's path has no hop to another
	 * thread on our side.  Until that connection is up, or once it is lost,
	 * such requests go first on the bulk connection as PSC_URGENT ones do.
	 */
	bool urgent_polled;
	bool reconnect;		       /* survive a lost connection (the server must accept again) */
	unsigned window_pages;	       /* background pages in flight (0: 4096, i.e. 16 MiB) */
	unsigned stall_ms;	       /* 0: 10000 */
	unsigned retry_ms;	       /* give up reconnecting after this long without success (0: 30000) */
	const struct lr_tls_opts *tls; /* NULL or !on: plain TCP */
};

#define PSC_URGENT     1U
#define PSC_BACKGROUND 0U
#define PSC_POLLED     2U /* with PSC_URGENT and opts.urgent_polled: done() runs in psc_poll() */

/*
 * status 0: dest holds the nr_pages pages.  -1: they could not be had; err
 * names the peer, stream offset, task, page and why.  Called on the
 * client's I/O thread, never with a client lock held; it may call
 * psc_submit() but must not block for long (every answer waits for it).
 */
typedef void (*psc_done_fn)(void *arg, int status, uint32_t pid, uint64_t vaddr, uint32_t nr_pages, const char *err);

/* Connect (both connections with urgent_channel; TLS handshakes). NULL with err. */
struct psc *psc_open(const struct psc_opts *o, char *err, size_t errlen);

/*
 * Ask for nr_pages (>= 1) pages of task pid from dump-time address vaddr
 * (page-aligned) into dest (nr_pages * 4096 bytes, untouched by the caller
 * until done runs).  0, or -1 with err (bad arguments, or the client has
 * failed: then done is not called).
 */
int psc_submit(struct psc *c, uint32_t pid, uint64_t vaddr, uint32_t nr_pages, void *dest, unsigned flags,
	       psc_done_fn done, void *arg, char *err, size_t errlen);

/*
 * urgent_polled: the urgent connection's socket (to poll for reading) and in
 * *gen its generation, which changes each time it is made again; -1 while
 * it is not up.  psc_poll() reads what it has and runs done() for each
 * whole answer, on the calling thread, with no client lock held.
 */
int psc_urgent_fd(struct psc *c, unsigned *gen);
void psc_poll(struct psc *c);

struct psc_stats {
	uint64_t requests, answers, short_answers, pages, bytes, reconnects;
};
void psc_get_stats(struct psc *c, struct psc_stats *st);

/*
 * Complete whatever is outstanding with -1 ("client closed"), send
 * PS_IOV_CLOSE on each idle connection and wait (stall_ms at most) for the
 * server's status, then free everything.  Returns 0 if every connection
 * ended with the server's status 0, -1 otherwise.
 */
int psc_close(struct psc *c);

#endif

// SPDX-License-Identifier: MIT
/*
 * Page source over the page-server client (net.h).  A request's completion
 * runs on the client's I/O thread; its error already names the peer, the
 * stream offset, the task and the page (client.c), which is what the engine
 * logs when it stops the tree.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/log/log.h"
#include "plugin/source/net.h"

struct net_source {
	struct page_source base;
	struct psc *c;
	char peer[96];
};

static void net_done(void *arg, int status, uint32_t pid, uint64_t vaddr, uint32_t nr_pages, const char *err)
{
	struct page_source_req *r = arg;

	(void)pid;
	(void)vaddr;
	(void)nr_pages;
	r->status = status ? -1 : 0;
	if (status)
		snprintf(r->err, sizeof(r->err), "%s", err ? err : "not served");
	r->done(r);
}

/* flags: urgent ones of the engine are PSC_POLLED (answered in net_poll, on its fault thread). */
static int submit_flags(struct page_source *s, struct page_source_req *r, unsigned flags, char *err, size_t errlen)
{
	struct net_source *ns = (struct net_source *)s;

	if (!r->nr_pages || r->nr_pages > UINT32_MAX || !r->done) {
		snprintf(err, errlen, "peer %s: pid %u page %#llx: bad request of %llu pages", ns->peer, r->pid,
			 (unsigned long long)r->vaddr, (unsigned long long)r->nr_pages);
		return -1;
	}
	r->status = 0;
	r->err[0] = 0;
	return psc_submit(ns->c, r->pid, r->vaddr, (uint32_t)r->nr_pages, r->buf, flags, net_done, r, err, errlen);
}

static int net_submit(struct page_source *s, struct page_source_req *r, char *err, size_t errlen)
{
	return submit_flags(s, r, r->urgent ? PSC_URGENT | PSC_POLLED : PSC_BACKGROUND, err, errlen);
}

static int net_poll_fd(struct page_source *s, unsigned *gen)
{
	return psc_urgent_fd(((struct net_source *)s)->c, gen);
}

static void net_poll(struct page_source *s)
{
	psc_poll(((struct net_source *)s)->c);
}

/*
 * read(): one request, waited for (someone waits: it goes as urgent), and
 * answered on the client's thread: the caller may be the one that polls.
 */
struct waiter {
	struct page_source_req r;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
};

static void wait_done(struct page_source_req *r)
{
	struct waiter *w = r->arg;

	pthread_mutex_lock(&w->lock);
	w->done = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

static int net_read(struct page_source *s, uint32_t pid, uint64_t vaddr, uint64_t nr_pages, void *buf, char *err,
		    size_t errlen)
{
	struct waiter w = {
	    .r = {.pid = pid, .vaddr = vaddr, .nr_pages = nr_pages, .buf = buf, .urgent = true, .done = wait_done},
	    .lock = PTHREAD_MUTEX_INITIALIZER,
	    .cond = PTHREAD_COND_INITIALIZER};

	w.r.arg = &w;
	if (submit_flags(s, &w.r, PSC_URGENT, err, errlen))
		return -1;
	pthread_mutex_lock(&w.lock);
	while (!w.done)
		pthread_cond_wait(&w.cond, &w.lock);
	pthread_mutex_unlock(&w.lock);
	if (w.r.status)
		snprintf(err, errlen, "%s", w.r.err);
	return w.r.status;
}

static void net_destroy(struct page_source *s)
{
	struct net_source *ns = (struct net_source *)s;
	struct psc_stats st;

	psc_get_stats(ns->c, &st);
	if (psc_close(ns->c))
		pr_info("page server %s: the connection did not end with PS_IOV_CLOSE confirmed", ns->peer);
	pr_info("page server %s: %llu requests, %llu pages, %llu short answers, %llu reconnects", ns->peer,
		(unsigned long long)st.requests, (unsigned long long)st.pages, (unsigned long long)st.short_answers,
		(unsigned long long)st.reconnects);
	free(ns);
}

static const struct page_source_ops net_ops = {
    .read = net_read,
    .submit = net_submit,
    .poll_fd = net_poll_fd,
    .poll = net_poll,
    .destroy = net_destroy,
};

struct page_source *net_source_open(const struct psc_opts *o, char *err, size_t errlen)
{
	struct net_source *ns = calloc(1, sizeof(*ns));

	if (!ns) {
		snprintf(err, errlen, "out of memory for the page source");
		return NULL;
	}
	snprintf(ns->peer, sizeof(ns->peer), "%.80s:%d", o->host, o->port);
	struct psc_opts po = *o;

	/* the fault thread sends its requests and reads their answers itself */
	po.urgent_polled = true;
	ns->c = psc_open(&po, err, errlen);
	if (!ns->c) {
		free(ns);
		return NULL;
	}
	ns->base.ops = &net_ops;
	ns->base.copies = true;
	ns->base.choice.kind = PAGE_SOURCE_NET;
	ns->base.choice.step = 256UL << 10;
	snprintf(ns->base.choice.why, sizeof(ns->base.choice.why), "page server %s (%s, wire %s)", ns->peer,
		 o->tls && o->tls->on ? "TLS" : "plain TCP", o->wire == PS_WIRE_32 ? "4.2" : "4.1");
	return &ns->base;
}

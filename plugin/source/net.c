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

static int net_submit(struct page_source *s, struct page_source_req *r, char *err, size_t errlen)
{
	struct net_source *ns = (struct net_source *)s;

	if (!r->nr_pages || r->nr_pages > UINT32_MAX || !r->done) {
		snprintf(err, errlen, "peer %s: pid %u page %#llx: bad request of %llu pages", ns->peer, r->pid,
			 (unsigned long long)r->vaddr, (unsigned long long)r->nr_pages);
		return -1;
	}
	r->status = 0;
	r->err[0] = 0;
	return psc_submit(ns->c, r->pid, r->vaddr, (uint32_t)r->nr_pages, r->buf,
			  r->urgent ? PSC_URGENT : PSC_BACKGROUND, net_done, r, err, errlen);
}

/* read(): one request, waited for (someone waits: it goes as urgent). */
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
	if (net_submit(s, &w.r, err, errlen))
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
	ns->c = psc_open(o, err, errlen);
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

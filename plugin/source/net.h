/* SPDX-License-Identifier: MIT */
/*
 * A page source over the network: CRIU's page-server protocol through our
 * asynchronous client (plugin/transport/client.h), from `lazyrestore
 * page-server` or `criu dump --lazy-pages`.  It offers submit() (urgent for
 * faults) and read() as submit-and-wait; it has no get().
 */
#ifndef LAZYRESTORE_SOURCE_NET_H
#define LAZYRESTORE_SOURCE_NET_H

#include "plugin/source/source.h"
#include "plugin/transport/client.h"

/* Connects (TLS handshake included) before it returns; NULL with err naming the peer. */
struct page_source *net_source_open(const struct psc_opts *o, char *err, size_t errlen);

#endif

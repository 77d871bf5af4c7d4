/* SPDX-License-Identifier: MIT */
/* The lazy-pages daemon: options and the serve sequence. */
#ifndef LAZYRESTORE_DAEMON_H
#define LAZYRESTORE_DAEMON_H

#include <stdbool.h>
#include <stdint.h>

#include "plugin/source/source.h"
#include "plugin/transport/io.h"
#include "plugin/transport/wire.h"

struct lr_daemon_opts {
	const char *images_dir, *work_dir, *log_file, *stats_file;
	int status_fd, level;
	unsigned workers;
	bool workers_given;		   /* --workers on the command line (else a default by --fault-cpu) */
	uint64_t prefetch_step;		   /* largest background step, bytes; 0 = the probe's */
	enum page_source_kind page_source; /* AUTO: probe this host */
	int workers_beside_faults;	   /* -1 auto (probe this host), 0 no (wait for a calm spell), 1 yes */
	int fault_cpu;			   /* -1 auto (probe this host), 0 any, 1 follow the faulting thread */
	bool progress;
	bool no_supervisor; /* run the engine in this process (no restart on a crash) */
	/* --page-server: pages from address:port, not from the images dir's pages files */
	bool page_server;
	const char *address;
	int port;
	enum ps_wire wire;
	struct lr_tls_opts tls;
	bool record_ws;		/* write the first faults as the dump's working set (engine/ws.h) */
	unsigned record_ws_for; /* s after the restore-finished marker with no prefetch while recording */
	int ws_hold_ms;		/* replaying: criu holds the tasks after the marker this long at most; -1 auto */
};

int lr_daemon_run(const struct lr_daemon_opts *o);

#endif

// SPDX-License-Identifier: MIT
/*
 * `lazyrestore lazy-pages`: a drop-in for `criu lazy-pages` serving a restore
 * from local images.  Accepts the command line zdtm.py gives it (see
 * the "lazy-pages" action in restore() of CRIU's test/zdtm.py).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "images/image.h"
#include "plugin/cli/commands.h"
#include "plugin/daemon/daemon.h"
#include "plugin/engine/engine.h"
#include "plugin/handoff/handoff.h"
#include "plugin/log/log.h"
#include "plugin/source/source.h"

static const char usage_text[] =
    "usage: lazyrestore lazy-pages [OPTIONS]\n"
    "\n"
    "Serve the memory of a lazily restored process tree: a drop-in for\n"
    "`criu lazy-pages`.  Start it first, wait for it to listen (--status-fd), then\n"
    "run `criu restore --lazy-pages -d` with the same work directory.  It receives\n"
    "every restored task's userfaultfd on WORKDIR/lazy-pages.socket, serves page\n"
    "faults from the images at once (with an adaptive fault-around window),\n"
    "streams the remaining pages in the background once the restore has finished,\n"
    "and exits 0 when every task's memory is resident or the task is gone.\n"
    "If a page cannot be served correctly (unreadable or inconsistent images, a\n"
    "broken hand-off) it kills the restored tree and logs one line saying why:\n"
    "a restored program never runs with wrong memory.\n"
    "\n"
    "options:\n"
    "  -D, --images-dir DIR   the dump to serve (default: .)\n"
    "  -W, --work-dir DIR     where lazy-pages.socket and a relative log file go\n"
    "                         (default: the images dir); criu restore must use the same\n"
    "  -o, --log-file FILE    log here ('-' = stdout; default stderr); relative to WORKDIR\n"
    "  -v[v...], -vN          more verbose (each v adds a level), or level N\n"
    "      --verbosity[=N]    log level: 1 errors, 2 +warnings (default), 3 +info, 4 +debug\n"
    "      --status-fd FD     write one 0x00 byte to FD once listening, then close it\n"
    "      --stats FILE       at exit write the stats as JSON to FILE\n"
    "      --progress         draw a progress line on stderr when it is a terminal\n"
    "      --workers N        prefetch threads besides the fault thread, which prefetches\n"
    "                         too between faults unless it follows the program (see\n"
    "                         --fault-cpu); they use idle CPU time only, or when it\n"
    "                         follows, one in that CPU's idle time and the others at\n"
    "                         the lowest priority on the other CPUs (0..8, default 1,\n"
    "                         2 when it follows; 0 = the fault thread prefetches alone,\n"
    "                         as stock criu does)\n"
    "      --workers-beside-faults auto|yes|no  whether workers copy while the program\n"
    "                         faults (no: a worker starts a step only after 1 ms without\n"
    "                         a fault); auto: a short probe at start measures what a\n"
    "                         thread of ours runnable on a faulting thread's CPU costs\n"
    "                         each fault, and says no where it makes faults 1.5x slower\n"
    "                         (kept for the boot in /run/lazyrestore/workers-beside-faults)\n"
    "      --fault-cpu auto|follow|any  where the fault thread runs. follow: on the CPU\n"
    "                         of the thread whose fault it serves, sleeping between\n"
    "                         faults, the workers on the other CPUs (a fault is then a\n"
    "                         switch between two threads of one CPU, not two cross-CPU\n"
    "                         wake-ups); any: where the scheduler puts it, streaming\n"
    "                         between faults once the restore has finished; auto: a\n"
    "                         short probe at start serves faults both ways and says\n"
    "                         follow where that is 1.5x faster (kept for the boot in\n"
    "                         /run/lazyrestore/fault-cpu).  Needs --workers 1 or more;\n"
    "                         with follow, --workers-beside-faults does not apply\n"
    "      --prefetch-step KIB  largest background UFFDIO_COPY, 4..2048 KiB (default:\n"
    "                         the probe's best); steps start at 64 KiB or less and grow\n"
    "                         while no fault comes, so a fault waits behind small ones\n"
    "      --page-source auto|mmap|pread  copy from the pages files' mapping or through\n"
    "                         per-thread buffers filled by pread (default auto: a short\n"
    "                         probe at start picks the faster on this host and logs why)\n"
    "      --no-supervisor    run the engine in this process; by default a small\n"
    "                         supervisor process keeps a dup of every uffd and a journal\n"
    "                         of uffd events, and restarts the engine if it is killed\n"
    "      --page-server      the lazy pages come from a page server (CRIU's protocol), not\n"
    "                         from the images dir, which must hold the dump's other image\n"
    "                         files (pagemap-*.img says which pages are lazy): `lazyrestore\n"
    "                         page-server` from the dump's images, or `criu dump\n"
    "                         --lazy-pages` keeping the tree frozen.  Faults are asked ahead\n"
    "                         of the background stream; a second connection carries them when\n"
    "                         the server takes one (ours does), and a lost connection is made\n"
    "                         again with backoff for 30 s while the tree waits.  A server of\n"
    "                         one connection (criu's) that is lost stops the tree with one\n"
    "                         line naming the peer, task and page\n"
    "      --address HOST     the page server's address (default 127.0.0.1)\n"
    "      --port PORT        the page server's port (required with --page-server)\n"
    "      --wire 4.1|4.2     the page-server header: CRIU 4.1's 24 bytes (default) or the\n"
    "                         32-byte one with a 64-bit page count; never guessed\n"
    "      --tls              TLS, as criu's: X.509 both ways, the server's certificate\n"
    "                         checked against the CA and against HOST\n"
    "      --tls-cacert FILE, --tls-cacrl FILE, --tls-cert FILE, --tls-key FILE\n"
    "                         as criu's (default: criu's files under /etc/pki)\n"
    "      --tls-no-cn-verify do not check the server's certificate against HOST\n"
    "      --record-ws        note the order in which pages are first faulted, per task,\n"
    "                         and write it at exit as the dump's working set,\n"
    "                         DIR/lazyrestore-ws.img (bounded: 1 GiB of pages a task),\n"
    "                         replacing the file there (which is not replayed then).\n"
    "                         Whenever that file is there and was made for this very\n"
    "                         dump, every task's working set is installed first, from\n"
    "                         the restore-finished marker on, before any other\n"
    "                         prefetch (faults are still served at once); a file of\n"
    "                         another dump, or a damaged one, is ignored with a warning\n"
    "      --ws-hold auto|MS  replaying a working set, have criu hold the restored tasks\n"
    "                         after the restore finished until the set is installed,\n"
    "                         MS milliseconds at most (0: the set is installed while the\n"
    "                         tasks run).  auto (the default): 1000 where prefetch\n"
    "                         workers wait for calm spells (copies beside a faulting\n"
    "                         program slow it on this host, so would the set's), else 0.\n"
    "                         Needs a criu with lazyrestore's criu-patches/0014; another\n"
    "                         criu releases the tasks at once, as if MS were 0\n"
    "      --record-ws-for SECONDS\n"
    "                         with --record-ws: for this long after the restore-finished\n"
    "                         marker nothing is prefetched, so that every page the tree\n"
    "                         touches first in that time faults and is recorded; then\n"
    "                         the prefetch runs and recording ends (default 5; 0: the\n"
    "                         prefetch from the marker on, and only the pages it did not\n"
    "                         reach first are recorded, until the end)\n"
    "      --no-default-config  accepted for criu compatibility; there is no config file\n"
    "  -h, --help             this text\n"
    "\n"
    "Exit status: 0 when all memory was served, 1 on any error, 2 on bad usage.\n";

enum {
	OPT_STATUS_FD = 256,
	OPT_VERBOSITY,
	OPT_NO_DEFAULT_CONFIG,
	OPT_STATS,
	OPT_PROGRESS,
	OPT_WORKERS,
	OPT_PREFETCH_STEP,
	OPT_PAGE_SOURCE,
	OPT_WORKERS_BESIDE,
	OPT_FAULT_CPU,
	OPT_NO_SUPERVISOR,
	OPT_PAGE_SERVER,
	OPT_ADDRESS,
	OPT_PORT,
	OPT_WIRE,
	OPT_RECORD_WS,
	OPT_RECORD_WS_FOR,
	OPT_WS_HOLD,
	OPT_TLS, /* LR_TLS_NR_OPTS ids from here: last */
};

static const struct option long_opts[] = {
    {"images-dir", required_argument, NULL, 'D'},
    {"work-dir", required_argument, NULL, 'W'},
    {"log-file", required_argument, NULL, 'o'},
    {"verbosity", optional_argument, NULL, OPT_VERBOSITY},
    {"status-fd", required_argument, NULL, OPT_STATUS_FD},
    {"stats", required_argument, NULL, OPT_STATS},
    {"progress", no_argument, NULL, OPT_PROGRESS},
    {"workers", required_argument, NULL, OPT_WORKERS},
    {"prefetch-step", required_argument, NULL, OPT_PREFETCH_STEP},
    {"page-source", required_argument, NULL, OPT_PAGE_SOURCE},
    {"workers-beside-faults", required_argument, NULL, OPT_WORKERS_BESIDE},
    {"fault-cpu", required_argument, NULL, OPT_FAULT_CPU},
    {"no-default-config", no_argument, NULL, OPT_NO_DEFAULT_CONFIG},
    {"no-supervisor", no_argument, NULL, OPT_NO_SUPERVISOR},
    {"page-server", no_argument, NULL, OPT_PAGE_SERVER},
    {"address", required_argument, NULL, OPT_ADDRESS},
    {"port", required_argument, NULL, OPT_PORT},
    {"wire", required_argument, NULL, OPT_WIRE},
    LR_TLS_LONGOPTS(OPT_TLS),
    {"record-ws", no_argument, NULL, OPT_RECORD_WS},
    {"record-ws-for", required_argument, NULL, OPT_RECORD_WS_FOR},
    {"ws-hold", required_argument, NULL, OPT_WS_HOLD},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static int parse_uint(const char *opt, const char *s, long max, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);

	if (errno || end == s || *end || v < 0 || v > max) {
		fprintf(stderr, "lazyrestore lazy-pages: %s: bad value '%s' (0..%ld)\n", opt, s, max);
		return -1;
	}
	*out = v;
	return 0;
}

/* "auto" -1, yes 1, no 0 */
static int parse_auto(const char *opt, const char *s, const char *yes, const char *no, int *out)
{
	if (!strcmp(s, "auto") || !strcmp(s, yes) || !strcmp(s, no)) {
		*out = !strcmp(s, "auto") ? -1 : !strcmp(s, yes);
		return 0;
	}
	fprintf(stderr, "lazyrestore lazy-pages: %s: '%s' is not auto, %s or %s\n", opt, s, yes, no);
	return -1;
}

static int parse_args(int argc, char **argv, struct lr_daemon_opts *o)
{
	int c;
	long v;

	memset(o, 0, sizeof(*o));
	o->images_dir = ".";
	o->status_fd = -1;
	o->level = LR_LOG_WARN;
	o->workers = 1;
	o->record_ws_for = 5;
	o->ws_hold_ms = -1;
	o->workers_beside_faults = -1;
	o->fault_cpu = -1;
	o->address = "127.0.0.1";
	o->port = -1;
	optind = 1;
	while ((c = getopt_long(argc, argv, "D:W:o:v::h", long_opts, NULL)) != -1) {
		if (c >= OPT_TLS && c < OPT_TLS + LR_TLS_NR_OPTS) {
			lr_tls_opt(&o->tls, c - OPT_TLS, optarg);
			continue;
		}
		switch (c) {
		case 'D':
			o->images_dir = optarg;
			break;
		case 'W':
			o->work_dir = optarg;
			break;
		case 'o':
			o->log_file = optarg;
			break;
		case 'v':
		case OPT_VERBOSITY:
			if (lr_log_verbosity_opt(optarg, &o->level))
				return -1;
			break;
		case OPT_STATUS_FD:
			if (parse_uint("--status-fd", optarg, INT_MAX, &v))
				return -1;
			o->status_fd = (int)v;
			break;
		case OPT_STATS:
			o->stats_file = optarg;
			break;
		case OPT_PROGRESS:
			o->progress = true;
			break;
		case OPT_WORKERS:
			if (parse_uint("--workers", optarg, 8, &v))
				return -1;
			o->workers = (unsigned)v;
			o->workers_given = true;
			break;
		case OPT_PREFETCH_STEP:
			if (parse_uint("--prefetch-step", optarg, 2048, &v))
				return -1;
			if (v < 4 || v % 4) {
				fprintf(stderr,
					"lazyrestore lazy-pages: --prefetch-step: %ld KiB is not a multiple of 4 KiB "
					"in 4..2048\n",
					v);
				return -1;
			}
			o->prefetch_step = (uint64_t)v << 10;
			break;
		case OPT_PAGE_SOURCE:
			if (!strcmp(optarg, "auto"))
				o->page_source = PAGE_SOURCE_AUTO;
			else if (!strcmp(optarg, "mmap"))
				o->page_source = PAGE_SOURCE_MAP;
			else if (!strcmp(optarg, "pread"))
				o->page_source = PAGE_SOURCE_READ;
			else {
				fprintf(stderr,
					"lazyrestore lazy-pages: --page-source: '%s' is not auto, mmap or pread\n",
					optarg);
				return -1;
			}
			break;
		case OPT_WORKERS_BESIDE:
			if (parse_auto("--workers-beside-faults", optarg, "yes", "no", &o->workers_beside_faults))
				return -1;
			break;
		case OPT_FAULT_CPU:
			if (parse_auto("--fault-cpu", optarg, "follow", "any", &o->fault_cpu))
				return -1;
			break;
		case OPT_NO_DEFAULT_CONFIG:
			break;
		case OPT_NO_SUPERVISOR:
			o->no_supervisor = true;
			break;
		case OPT_PAGE_SERVER:
			o->page_server = true;
			break;
		case OPT_ADDRESS:
			o->address = optarg;
			break;
		case OPT_PORT:
			if (parse_uint("--port", optarg, 65535, &v))
				return -1;
			o->port = (int)v;
			break;
		case OPT_WIRE:
			if (ps_wire_parse(optarg, &o->wire)) {
				fprintf(stderr, "lazyrestore lazy-pages: --wire: '%s' is not 4.1 or 4.2\n", optarg);
				return -1;
			}
			break;
		case OPT_RECORD_WS:
			o->record_ws = true;
			break;
		case OPT_RECORD_WS_FOR:
			if (parse_uint("--record-ws-for", optarg, 3600, &v))
				return -1;
			o->record_ws_for = (unsigned)v;
			break;
		case OPT_WS_HOLD:
			if (!strcmp(optarg, "auto"))
				v = -1;
			else if (parse_uint("--ws-hold (auto or MS)", optarg, 60000, &v))
				return -1;
			o->ws_hold_ms = (int)v;
			break;
		case 'h':
			fputs(usage_text, stdout);
			exit(0);
		default:
			fprintf(stderr, "Try 'lazyrestore lazy-pages --help'.\n");
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "lazyrestore lazy-pages: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	if (o->page_server && o->port < 0) {
		fprintf(stderr, "lazyrestore lazy-pages: --page-server needs --port\n");
		return -1;
	}
	if (!o->page_server && (o->port >= 0 || o->tls.on)) {
		fprintf(stderr, "lazyrestore lazy-pages: --port and --tls go with --page-server\n");
		return -1;
	}
	return 0;
}

int cmd_lazy_pages(int argc, char **argv)
{
	struct lr_daemon_opts o;

	if (parse_args(argc, argv, &o))
		return 2;
	/* A restore that dies must not kill us through a write to its socket. */
	signal(SIGPIPE, SIG_IGN);
	return lr_daemon_run(&o) ? 1 : 0;
}

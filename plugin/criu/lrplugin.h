/* SPDX-License-Identifier: MIT */
/*
 * The CRIU plugin (build/lib/lazyrestore.so): on `criu restore --lazy-pages`
 * it starts `lazyrestore lazy-pages` (supervisor + engine) detached, before
 * criu connects to WORKDIR/lazy-pages.socket.  Split in three: whether this
 * run is a lazy restore (detect.c), the listening socket (sockdiag.c),
 * starting and stopping the daemon (spawn.c); plugin.c ties them to criu.
 */
#ifndef LAZYRESTORE_CRIU_PLUGIN_H
#define LAZYRESTORE_CRIU_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* criu's own logging, exported by the criu binary (-rdynamic) to its plugins. */
void print_on_level(unsigned int loglevel, const char *format, ...) __attribute__((format(printf, 2, 3)));
unsigned int log_get_loglevel(void);

#define LRP_LOG_ERROR 1
#define LRP_LOG_WARN  2
#define LRP_LOG_INFO  3
#define LRP_LOG_DEBUG 4

#define lrp_err(fmt, ...)  print_on_level(LRP_LOG_ERROR, "Error (lazyrestore.so): " fmt "\n", ##__VA_ARGS__)
#define lrp_warn(fmt, ...) print_on_level(LRP_LOG_WARN, "Warn  (lazyrestore.so): " fmt "\n", ##__VA_ARGS__)
#define lrp_info(fmt, ...) print_on_level(LRP_LOG_INFO, "lazyrestore.so: " fmt "\n", ##__VA_ARGS__)

#define LRP_SOCK_NAME "lazy-pages.socket"

/*
 * The option NAME (a LAZYRESTORE_* variable): from criu's environment, else
 * from the config file ($LAZYRESTORE_CONFIG, default /etc/criu/lazyrestore.conf).
 */
const char *lrp_opt(const char *name);

/*
 * Is this `criu restore` lazy?  1 yes, 0 no.  Reads LAZYRESTORE_PLUGIN
 * (off / on / auto), criu's command line (/proc/self/cmdline) and the config
 * files criu reads.  *how says which of them decided (static text).
 */
int lrp_lazy_restore(const char **how);

/*
 * The listener on the socket file PATH (by its inode, through sock_diag):
 * 1 a socket listens on it (*pending = connections not yet accepted),
 * 0 none does, -1 can't tell (errno).
 */
int lrp_listener(const char *path, unsigned *pending);

struct lrp_daemon {
	pid_t pid; /* the daemon (its supervisor), in a session of its own */
	int pidfd; /* of pid, so that a signal never reaches a reused pid */
	char log[4096];
};

/*
 * Start the daemon serving IMAGES for a restore whose work dir is the
 * current directory; wait until it listens.  On failure, -1 and WHY (one line).
 */
int lrp_start(struct lrp_daemon *d, const char *images, char *why, size_t whylen);
/* SIGKILL the daemon if it is still alive. */
void lrp_kill(struct lrp_daemon *d);

#endif

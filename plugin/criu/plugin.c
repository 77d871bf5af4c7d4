// SPDX-License-Identifier: MIT
/*
 * lazyrestore.so, a CRIU plugin: `criu restore --lazy-pages` with nothing
 * started before.  criu calls init(RESTORE) before it connects to
 * WORKDIR/lazy-pages.socket (prepare_lazy_pages_socket), so init starts
 * `lazyrestore lazy-pages` there and returns once it listens; criu's own,
 * unmodified lazy-pages hand-off does the rest.  On any other run (dump,
 * pre-dump, eager restore, a daemon already listening) it does nothing, and
 * it registers no hook and never adds itself to a dump's inventory, so no
 * dump ever requires it.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The pinned CRIU tree's plugin header (build/criu-src, unpacked by `make`). */
#include "build/criu-src/criu/include/criu-plugin.h"
#include "plugin/criu/lrplugin.h"

static struct lrp_daemon daemon_;
static bool started;

static int image_dir(char *out)
{
	char proc[64];

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", criu_get_image_dir());
	return realpath(proc, out) ? 0 : -1;
}

static int lazyrestore_init(int stage)
{
	char images[PATH_MAX], wd[PATH_MAX], why[2048];
	const char *how;
	unsigned pending;
	struct stat st;
	int l;

	if (stage != CR_PLUGIN_STAGE__RESTORE)
		return 0;
	if (!lrp_lazy_restore(&how)) {
		lrp_info("not a lazy restore (%s): nothing to do", how);
		return 0;
	}
	if (!getcwd(wd, sizeof(wd)))
		snprintf(wd, sizeof(wd), "the work dir");
	l = lrp_listener(LRP_SOCK_NAME, &pending);
	if (l > 0) {
		lrp_warn("a lazy-pages daemon already listens on %s/%s: stepping aside, the restore is left to it", wd,
			 LRP_SOCK_NAME);
		return 0;
	}
	if (l < 0 && !stat(LRP_SOCK_NAME, &st)) {
		lrp_warn("can't tell whether %s/%s has a listener (sock_diag: %s): stepping aside", wd, LRP_SOCK_NAME,
			 strerror(errno));
		return 0;
	}
	if (image_dir(images)) {
		lrp_err("lazy restore (%s): the images dir is not a directory lazyrestore can open: %s", how,
			strerror(errno));
		return -1;
	}
	if (lrp_start(&daemon_, images, why, sizeof(why))) {
		lrp_err("lazy restore (%s): can't start the lazy-pages engine: %s", how, why);
		return -1;
	}
	lrp_info("lazy restore (%s): serving %s from %s/%s", how, images, wd, LRP_SOCK_NAME);
	started = true;
	return 0;
}

static void lazyrestore_exit(int stage, int ret)
{
	unsigned pending;

	if (stage != CR_PLUGIN_STAGE__RESTORE || !started)
		return;
	started = false;
	if (ret) {
		lrp_warn("the restore failed: stopping the lazy-pages daemon (pid %d)", daemon_.pid);
		lrp_kill(&daemon_);
		return;
	}
	/* Still listening with nobody queued: criu never connected (an eager restore taken for lazy). */
	if (lrp_listener(LRP_SOCK_NAME, &pending) > 0 && !pending) {
		lrp_warn("criu never connected to the lazy-pages daemon (pid %d): stopped it", daemon_.pid);
		lrp_kill(&daemon_);
		return;
	}
	close(daemon_.pidfd);
	daemon_.pidfd = -1;
}

CR_PLUGIN_REGISTER("lazyrestore", lazyrestore_init, lazyrestore_exit)

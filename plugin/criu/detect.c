// SPDX-License-Identifier: MIT
/*
 * Is this `criu restore` a lazy one?  criu's options are not part of its
 * plugin interface, so the plugin reads what criu itself read: its command
 * line and its config files (/etc/criu/default.conf, ~/.criu/default.conf
 * unless --no-default-config or --config is given, $CRIU_CONFIG_FILE,
 * --config FILE).  An RPC restore (`criu swrk`, `criu service`) takes its
 * options from a request the plugin cannot see: LAZYRESTORE_PLUGIN=on says
 * it is lazy.  LAZYRESTORE_PLUGIN=off disables the plugin altogether.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin/criu/lrplugin.h"

#define CMDLINE_MAX (64 * 1024)

/* getopt_long takes any unambiguous prefix; "--la" is one only for --lazy-pages. */
static bool is_lazy_opt(const char *a)
{
	size_t n = strlen(a);

	return n >= 4 && n <= strlen("--lazy-pages") && !strncmp(a, "--lazy-pages", n);
}

/* A config line says lazy-pages if its first word is the option (criu adds the dashes). */
static bool config_says_lazy(const char *path)
{
	FILE *f = fopen(path, "re");
	char line[4096];
	bool lazy = false;

	if (!f)
		return false;
	while (!lazy && fgets(line, sizeof(line), f)) {
		char *w = line + strspn(line, " \t");

		w[strcspn(w, " \t\r\n#")] = 0;
		if (!strncmp(w, "--", 2))
			w += 2;
		lazy = !strcmp(w, "lazy-pages");
	}
	fclose(f);
	return lazy;
}

struct cmdline {
	bool lazy, no_default_config, rpc;
	const char *config; /* --config FILE */
};

static void scan_cmdline(char *buf, size_t len, struct cmdline *c)
{
	size_t i = strlen(buf) + 1; /* skip argv[0] */

	/* An RPC criu retitles itself "restore --rpc -D DIR" over its argv (one string). */
	if (strstr(buf, " --rpc"))
		c->rpc = true;

	while (i < len) {
		const char *a = buf + i;

		i += strlen(a) + 1;
		if (!strcmp(a, "--"))
			break;
		if (is_lazy_opt(a))
			c->lazy = true;
		else if (!strcmp(a, "--no-default-config"))
			c->no_default_config = true;
		else if (!strcmp(a, "--config") && i < len)
			c->config = buf + i;
		else if (!strncmp(a, "--config=", 9))
			c->config = a + 9;
		else if (!strcmp(a, "swrk") || !strcmp(a, "service") || !strcmp(a, "--rpc"))
			c->rpc = true;
	}
	if (c->config)
		c->no_default_config = true;
}

static ssize_t read_cmdline(char *buf, size_t size)
{
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	size_t len = 0;
	ssize_t n = 0;

	if (fd < 0)
		return -1;
	while (len < size - 1 && (n = read(fd, buf + len, size - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	if (n < 0)
		return -1;
	buf[len] = 0;
	return (ssize_t)len;
}

static bool configs_say_lazy(const struct cmdline *c, const char **how)
{
	const char *env = getenv("CRIU_CONFIG_FILE"), *home = getenv("HOME");
	char user[4096];

	if (!c->no_default_config) {
		if (config_says_lazy("/etc/criu/default.conf")) {
			*how = "lazy-pages in /etc/criu/default.conf";
			return true;
		}
		if (home && snprintf(user, sizeof(user), "%s/.criu/default.conf", home) < (int)sizeof(user) &&
		    config_says_lazy(user)) {
			*how = "lazy-pages in ~/.criu/default.conf";
			return true;
		}
	}
	if (env && config_says_lazy(env)) {
		*how = "lazy-pages in $CRIU_CONFIG_FILE";
		return true;
	}
	if (c->config && config_says_lazy(c->config)) {
		*how = "lazy-pages in the --config file";
		return true;
	}
	return false;
}

int lrp_lazy_restore(const char **how)
{
	const char *mode = lrp_opt("LAZYRESTORE_PLUGIN");
	struct cmdline c = {0};
	char *buf;
	ssize_t len;

	if (mode && !strcmp(mode, "off")) {
		*how = "LAZYRESTORE_PLUGIN=off";
		return 0;
	}
	if (mode && !strcmp(mode, "on")) {
		*how = "LAZYRESTORE_PLUGIN=on";
		return 1;
	}
	if (mode && *mode && strcmp(mode, "auto"))
		lrp_warn("LAZYRESTORE_PLUGIN=%s is none of on, off, auto: taken as auto", mode);
	buf = malloc(CMDLINE_MAX);
	if (!buf) {
		*how = "no memory to read the command line";
		return 0;
	}
	len = read_cmdline(buf, CMDLINE_MAX);
	if (len > 0)
		scan_cmdline(buf, (size_t)len, &c);
	if (c.lazy)
		*how = "--lazy-pages on the command line";
	else if (configs_say_lazy(&c, how))
		c.lazy = true;
	else if (c.rpc)
		*how = "an RPC restore (its options are not visible to plugins: LAZYRESTORE_PLUGIN=on for a lazy one)";
	else
		*how = "no --lazy-pages on the command line or in a config file";
	free(buf);
	return c.lazy;
}

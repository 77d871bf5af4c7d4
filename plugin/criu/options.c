// SPDX-License-Identifier: MIT
/*
 * The plugin's options: each LAZYRESTORE_* variable from criu's environment,
 * else from the config file ($LAZYRESTORE_CONFIG, default
 * /etc/criu/lazyrestore.conf): lines NAME=VALUE with NAME one of the
 * variables below, '#' comments and blank lines ignored, anything else
 * warned about in criu's log.  Read once, at the first option asked for.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/criu/lrplugin.h"

#define DEFAULT_CONFIG "/etc/criu/lazyrestore.conf"

static const char *const known[] = {
    "LAZYRESTORE_PLUGIN",  "LAZYRESTORE_BIN",	      "LAZYRESTORE_LOG",	   "LAZYRESTORE_STATS",
    "LAZYRESTORE_WORKERS", "LAZYRESTORE_PAGE_SERVER", "LAZYRESTORE_START_TIMEOUT",
};
#define NR_KNOWN (sizeof(known) / sizeof(known[0]))

static char *from_file[NR_KNOWN];
static bool loaded;

static int known_index(const char *name, size_t len)
{
	for (size_t i = 0; i < NR_KNOWN; i++)
		if (strlen(known[i]) == len && !strncmp(known[i], name, len))
			return (int)i;
	return -1;
}

static void parse_line(const char *path, unsigned n, char *line)
{
	char *s = line + strspn(line, " \t"), *eq;
	int i;

	s[strcspn(s, "\r\n")] = 0;
	if (!*s || *s == '#')
		return;
	eq = strchr(s, '=');
	i = eq ? known_index(s, (size_t)(eq - s)) : -1;
	if (i < 0) {
		lrp_warn("%s:%u: not NAME=VALUE with a LAZYRESTORE_* name: ignored", path, n);
		return;
	}
	free(from_file[i]);
	from_file[i] = strdup(eq + 1);
}

static void load(void)
{
	const char *path = getenv("LAZYRESTORE_CONFIG");
	char line[PATH_MAX + 64];
	unsigned n = 0;
	FILE *f;

	loaded = true;
	if (!path || !*path)
		path = DEFAULT_CONFIG;
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		parse_line(path, ++n, line);
	fclose(f);
	lrp_info("options from %s (the environment goes first)", path);
}

const char *lrp_opt(const char *name)
{
	const char *v = getenv(name);
	int i = known_index(name, strlen(name));

	if (v)
		return v;
	if (!loaded)
		load();
	return i < 0 ? NULL : from_file[i];
}

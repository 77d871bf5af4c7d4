// SPDX-License-Identifier: MIT
/* lazyrestore: one binary, several subcommands (git/criu style). */
#include <stdio.h>
#include <string.h>

#include "plugin/cli/commands.h"

static const struct lr_command commands[] = {
    {"show", "print the tasks, VMAs and lazy/present pages of a dump", cmd_show},
    {"lazy-pages", "serve a lazy restore's memory (drop-in for criu lazy-pages)", cmd_lazy_pages},
    {"page-server", "serve a dump's pages over TCP (CRIU page-server protocol)", cmd_page_server},
    {"record-ws", "record the working set of a running program for a later lazy restore", cmd_record_ws},
    {"check", "probe the kernel, host and criu for every fact lazyrestore needs", cmd_check},
    {"page-fetch", "fetch a dump's pages from a page server and check them (transport test)", cmd_page_fetch},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: lazyrestore COMMAND [OPTIONS]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\n'lazyrestore COMMAND --help' describes each command.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "lazyrestore: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}

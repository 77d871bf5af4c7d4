/* SPDX-License-Identifier: MIT */
/* Subcommands of the lazyrestore CLI; each parses its own options. */
#ifndef LAZYRESTORE_COMMANDS_H
#define LAZYRESTORE_COMMANDS_H

struct lr_command {
	const char *name;
	const char *summary;
	int (*run)(int argc, char **argv); /* argv[0] is the command name */
};

int cmd_show(int argc, char **argv);
int cmd_page_server(int argc, char **argv);
int cmd_lazy_pages(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_page_fetch(int argc, char **argv);
int cmd_record_ws(int argc, char **argv);

#endif

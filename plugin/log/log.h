/* SPDX-License-Identifier: MIT */
/*
 * Logging for the page server.  Lines carry CRIU's prefixes ("Error (file:line): ",
 * "Warn  (file:line): ") because zdtm greps a lazy-pages log for them.
 */
#ifndef LAZYRESTORE_LOG_H
#define LAZYRESTORE_LOG_H

enum lr_log_level {
	LR_LOG_ERROR = 1,
	LR_LOG_WARN = 2,
	LR_LOG_INFO = 3,
	LR_LOG_DEBUG = 4,
};

/* path NULL or "-": stderr ("-" means stdout, as in CRIU). */
int lr_log_open(const char *path);
void lr_log_set_level(int level);
int lr_log_level(void);
void lr_log_close(void);
/*
 * criu's verbosity options: "-v" (arg NULL) and "-vv..." add levels, "-vN"
 * and "--verbosity=N" set level N.  Returns -1 (after saying why) on a bad value.
 */
int lr_log_verbosity_opt(const char *arg, int *level);
void lr_log_msg(int level, const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#define pr_err(fmt, ...)    lr_log_msg(LR_LOG_ERROR, __FILE__, __LINE__, fmt, ##__VA_ARGS__)
#define pr_warn(fmt, ...)   lr_log_msg(LR_LOG_WARN, __FILE__, __LINE__, fmt, ##__VA_ARGS__)
#define pr_info(fmt, ...)   lr_log_msg(LR_LOG_INFO, __FILE__, __LINE__, fmt, ##__VA_ARGS__)
#define pr_debug(fmt, ...)  lr_log_msg(LR_LOG_DEBUG, __FILE__, __LINE__, fmt, ##__VA_ARGS__)
#define pr_perror(fmt, ...) pr_err(fmt ": %m", ##__VA_ARGS__)

#endif

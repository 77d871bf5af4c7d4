// SPDX-License-Identifier: MIT
/*
 * Restored tasks are identified by ancestry, not by trusting a pid number: an
 * image pid may belong to an unrelated process here (another pid namespace),
 * so only processes criu restore made are touched: its descendants, and the
 * trees it forks as its own siblings (clone(CLONE_PARENT) for
 * --restore-sibling, which runc asks for): children of criu's parent that
 * started after criu did.
 */
#include <ctype.h>
#include <dirent.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/engine/tree.h"
#include "plugin/log/log.h"

struct proc_ent {
	pid_t pid, ppid;
	uint32_t nspid; /* innermost */
};

static int read_status(pid_t pid, struct proc_ent *p)
{
	char path[64], line[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	p->pid = pid;
	p->ppid = 0;
	p->nspid = (uint32_t)pid;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "PPid:", 5))
			p->ppid = atoi(line + 5);
		else if (!strncmp(line, "NSpid:", 6)) {
			char *last = strrchr(line, '\t');
			p->nspid = (uint32_t)strtoul(last ? last + 1 : line + 6, NULL, 10);
		}
	}
	fclose(f);
	return 0;
}

/* Start time of pid in clock ticks since boot (/proc/PID/stat field 22), 0 if unknown. */
static unsigned long long start_time(pid_t pid)
{
	char path[64], buf[1024];
	unsigned long long t = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	/* comm may hold spaces and parentheses: the fields start after the last ')' */
	char *p = strrchr(buf, ')');
	if (!p ||
	    sscanf(p + 1, "%*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu", &t) != 1)
		return 0;
	return t;
}

/* The criu restore that connected: its pid, its parent and when it started. */
struct restore_id {
	pid_t criu, parent;
	unsigned long long start;
};

/*
 * Read once: every task's hand-off asks, on criu's critical path, and a daemon
 * serves one restore (one criu, alive while it hands tasks over).
 */
static int restore_id(pid_t criu, struct restore_id *r)
{
	static __thread struct restore_id last;
	struct proc_ent p;

	if (last.criu == criu) {
		*r = last;
		return 0;
	}
	if (read_status(criu, &p))
		return -1;
	r->criu = criu;
	r->parent = p.ppid;
	r->start = start_time(criu);
	if (!r->start)
		return -1;
	last = *r;
	return 0;
}

/* Is pid, a child of ppid, one that criu made: its child, or its sibling born after it? */
static bool made_by(const struct restore_id *r, pid_t pid, pid_t ppid)
{
	if (ppid == r->criu)
		return true;
	if (ppid != r->parent || pid == r->criu || r->parent <= 1)
		return false;
	unsigned long long t = start_time(pid);
	return t && t >= r->start;
}

/* Snapshot of /proc; *out freed by the caller. */
static size_t scan_procs(struct proc_ent **out)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	size_t nr = 0, cap = 0;
	struct proc_ent *v = NULL;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		if (nr == cap) {
			size_t ncap = cap ? cap * 2 : 256;
			struct proc_ent *nv = realloc(v, ncap * sizeof(*v));
			if (!nv)
				break;
			v = nv;
			cap = ncap;
		}
		if (!read_status(atoi(de->d_name), &v[nr]))
			nr++;
	}
	closedir(d);
	*out = v;
	return nr;
}

/* Is pid, walked up through v's PPid, a process of the restore r? */
static bool in_restore(const struct proc_ent *v, size_t nr, pid_t pid, const struct restore_id *r)
{
	for (int depth = 0; depth < 64 && pid > 1; depth++) {
		pid_t parent = 0;
		for (size_t i = 0; i < nr; i++)
			if (v[i].pid == pid)
				parent = v[i].ppid;
		if (made_by(r, pid, parent))
			return true;
		pid = parent;
	}
	return false;
}

/* The same, reading /proc/PID/status on the way up instead of a snapshot. */
static bool reaches(pid_t pid, const struct restore_id *r)
{
	struct proc_ent p;

	for (int depth = 0; depth < 64 && pid > 1; depth++) {
		if (read_status(pid, &p))
			return false;
		if (made_by(r, pid, p.ppid))
			return true;
		pid = p.ppid;
	}
	return false;
}

/*
 * The common case, cheaply: the task has the same pid here (criu restored it
 * in our pid namespace).  A hand-off is on the restore's critical path: the
 * restorer's first fault waits for it, so a walk of all of /proc comes last.
 */
static pid_t find_same_pid(const struct restore_id *r, uint32_t vpid)
{
	struct proc_ent p;

	if (vpid > INT32_MAX || read_status((pid_t)vpid, &p) || p.nspid != vpid)
		return 0;
	return reaches(p.pid, r) ? p.pid : 0;
}

pid_t lr_tree_find(pid_t ancestor, uint32_t vpid)
{
	struct proc_ent *v = NULL;
	struct restore_id r;

	if (restore_id(ancestor, &r))
		return 0;
	pid_t found = find_same_pid(&r, vpid);
	if (found)
		return found;
	size_t nr = scan_procs(&v);
	for (size_t i = 0; i < nr && !found; i++)
		if (v[i].nspid == vpid && in_restore(v, nr, v[i].pid, &r))
			found = v[i].pid;
	free(v);
	return found;
}

/* Is pid below ancestor in v? */
static bool is_descendant(const struct proc_ent *v, size_t nr, pid_t pid, pid_t ancestor)
{
	for (int depth = 0; depth < 64 && pid > 1; depth++) {
		pid_t parent = 0;
		for (size_t i = 0; i < nr; i++)
			if (v[i].pid == pid)
				parent = v[i].ppid;
		if (parent == ancestor)
			return true;
		pid = parent;
	}
	return false;
}

void lr_tree_kill(const pid_t *pids, size_t nr)
{
	struct proc_ent *v = NULL;
	size_t n = scan_procs(&v);

	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < nr; k++)
			if (pids[k] > 1 && (v[i].pid == pids[k] || is_descendant(v, n, v[i].pid, pids[k]))) {
				if (kill(v[i].pid, SIGKILL) && lr_log_level() >= LR_LOG_DEBUG)
					pr_debug("kill %d: %m", v[i].pid);
				break;
			}
	free(v);
}

// SPDX-License-Identifier: MIT
/* lazyrestore show: what a dump holds, task by task — the first thing to run on a dump. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "images/image.h"
#include "plugin/cli/commands.h"

struct page_counts {
	uint64_t lazy;	 /* PE_LAZY: restored on demand by a lazy restore */
	uint64_t remote; /* PE_LAZY without data here (dump --lazy-pages) */
	uint64_t eager;	 /* PE_PRESENT only: restored by criu itself */
	uint64_t parent; /* PE_PARENT: data in a parent image */
};

static const char show_usage[] = "usage: lazyrestore show [--json] DIR\n"
				 "\n"
				 "Print what the CRIU dump in DIR holds: for every task in pstree.img its state,\n"
				 "threads and VMAs, and how many of its dumped pages a lazy restore serves on\n"
				 "demand (lazy) and how many criu restores itself (eager), with totals.\n"
				 "Every image is validated; a malformed one is reported with its file name,\n"
				 "the byte offset and the problem, and the exit status is 1.\n"
				 "\n"
				 "options:\n"
				 "  -j, --json    one JSON document on stdout instead of the table\n"
				 "  -h, --help    this text\n"
				 "\n"
				 "Page kinds: lazy = PE_LAZY (of which 'remote' have no data in this directory,\n"
				 "as written by 'criu dump --lazy-pages'); eager = PE_PRESENT without PE_LAZY;\n"
				 "parent = PE_PARENT (data in the parent image of a pre-dump chain).\n";

static void count_pme(struct page_counts *c, const struct img_pme *p, uint64_t pages)
{
	if (p->flags & IMG_PE_LAZY) {
		c->lazy += pages;
		if (!(p->flags & IMG_PE_PRESENT))
			c->remote += pages;
	} else if (p->flags & IMG_PE_PRESENT) {
		c->eager += pages;
	} else if (p->flags & IMG_PE_PARENT) {
		c->parent += pages;
	}
}

static void add_counts(struct page_counts *to, const struct page_counts *c)
{
	to->lazy += c->lazy;
	to->remote += c->remote;
	to->eager += c->eager;
	to->parent += c->parent;
}

/* Pages of each pagemap entry that fall inside vma v. */
static void count_vma(const struct img_mm *mm, const struct img_vma *v, struct page_counts *c)
{
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < mm->nr_pmes; i++) {
		const struct img_pme *p = &mm->pmes[i];
		uint64_t s = p->vaddr, e = p->vaddr + ((uint64_t)p->nr_pages << IMG_PAGE_SHIFT);

		if (e <= v->start)
			continue;
		if (s >= v->end)
			break;
		s = s > v->start ? s : v->start;
		e = e < v->end ? e : v->end;
		count_pme(c, p, (e - s) >> IMG_PAGE_SHIFT);
	}
}

static const char *state_name(int state)
{
	switch (state) {
	case IMG_TASK_ALIVE:
		return "alive";
	case IMG_TASK_DEAD:
		return "zombie";
	case IMG_TASK_STOPPED:
		return "stopped";
	}
	return "unknown";
}

static void prot_str(uint32_t prot, uint32_t flags, char out[5])
{
	out[0] = prot & PROT_READ ? 'r' : '-';
	out[1] = prot & PROT_WRITE ? 'w' : '-';
	out[2] = prot & PROT_EXEC ? 'x' : '-';
	out[3] = flags & MAP_SHARED ? 's' : 'p';
	out[4] = 0;
}

static const char *vma_kind(const struct img_vma *v)
{
	if (v->status & IMG_VMA_AREA_VDSO)
		return "vdso";
	if (v->status & IMG_VMA_AREA_VVAR)
		return "vvar";
	if (v->status & IMG_VMA_AREA_VSYSCALL)
		return "vsyscall";
	if (v->status & IMG_VMA_AREA_HEAP)
		return "heap";
	if (v->status & IMG_VMA_AREA_STACK)
		return "stack";
	if (v->status & IMG_VMA_AREA_SYSVIPC)
		return "sysv-shm";
	if (v->status & IMG_VMA_AREA_MEMFD)
		return "memfd";
	if (v->status & IMG_VMA_AREA_AIORING)
		return "aio-ring";
	if (v->status & IMG_VMA_FILE_PRIVATE)
		return "file-private";
	if (v->status & IMG_VMA_FILE_SHARED)
		return "file-shared";
	if (v->status & IMG_VMA_ANON_SHARED)
		return "anon-shared";
	if (v->status & IMG_VMA_ANON_PRIVATE)
		return "anon-private";
	return "other";
}

static void human(uint64_t pages, char *buf, size_t len)
{
	double b = (double)(pages << IMG_PAGE_SHIFT);
	const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	int u = 0;

	while (b >= 1024 && u < 4) {
		b /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", b, unit[u]);
}

static void print_counts_text(const char *indent, const struct page_counts *c)
{
	char l[32], e[32], p[32];

	human(c->lazy, l, sizeof(l));
	human(c->eager, e, sizeof(e));
	human(c->parent, p, sizeof(p));
	printf("%slazy %" PRIu64 " pages (%s)", indent, c->lazy, l);
	if (c->remote)
		printf(", %" PRIu64 " of them remote", c->remote);
	printf("; eager %" PRIu64 " pages (%s); in parent %" PRIu64 " pages (%s)\n", c->eager, e, c->parent, p);
}

static void print_counts_json(const struct page_counts *c)
{
	printf("{\"lazy\": %" PRIu64 ", \"remote\": %" PRIu64 ", \"eager\": %" PRIu64 ", \"parent\": %" PRIu64
	       ", \"lazy_bytes\": %" PRIu64 ", \"eager_bytes\": %" PRIu64 "}",
	       c->lazy, c->remote, c->eager, c->parent, c->lazy << IMG_PAGE_SHIFT, c->eager << IMG_PAGE_SHIFT);
}

static void print_task_text(const struct img_task *t, const struct img_mm *mm, struct page_counts *tot)
{
	struct page_counts c;

	printf("task %u (ppid %u, pgid %u, sid %u): %s, %zu thread%s\n", t->pid, t->ppid, t->pgid, t->sid,
	       state_name(t->state), t->nr_threads, t->nr_threads == 1 ? "" : "s");
	if (!mm)
		return;
	printf("  %-33s %10s %-4s %-12s %4s %9s %9s %9s\n", "VMA", "size", "prot", "kind", "lazy", "lazy-pg",
	       "eager-pg", "parent-pg");
	memset(tot, 0, sizeof(*tot));
	for (size_t i = 0; i < mm->nr_vmas; i++) {
		const struct img_vma *v = &mm->vmas[i];
		char range[40], size[32], prot[5];

		count_vma(mm, v, &c);
		snprintf(range, sizeof(range), "%012" PRIx64 "-%012" PRIx64, v->start, v->end);
		human((v->end - v->start) >> IMG_PAGE_SHIFT, size, sizeof(size));
		prot_str(v->prot, v->flags, prot);
		printf("  %-33s %10s %-4s %-12s %4s %9" PRIu64 " %9" PRIu64 " %9" PRIu64 "\n", range, size, prot,
		       vma_kind(v), img_vma_can_be_lazy(v) ? "yes" : "no", c.lazy, c.eager, c.parent);
	}
	for (size_t i = 0; i < mm->nr_pmes; i++)
		count_pme(tot, &mm->pmes[i], mm->pmes[i].nr_pages);
	print_counts_text("  pages: ", tot);
}

static void print_task_json(const struct img_task *t, const struct img_mm *mm, struct page_counts *tot, bool first)
{
	struct page_counts c;

	printf("%s\n    {\"pid\": %u, \"ppid\": %u, \"pgid\": %u, \"sid\": %u, \"state\": \"%s\", \"threads\": [",
	       first ? "" : ",", t->pid, t->ppid, t->pgid, t->sid, state_name(t->state));
	for (size_t i = 0; i < t->nr_threads; i++)
		printf("%s%u", i ? ", " : "", t->threads[i]);
	printf("]");
	memset(tot, 0, sizeof(*tot));
	if (mm) {
		printf(", \"pages_id\": %u, \"vmas\": [", mm->pages_id);
		for (size_t i = 0; i < mm->nr_vmas; i++) {
			const struct img_vma *v = &mm->vmas[i];
			char prot[5];

			count_vma(mm, v, &c);
			prot_str(v->prot, v->flags, prot);
			printf("%s\n      {\"start\": \"0x%" PRIx64 "\", \"end\": \"0x%" PRIx64
			       "\", \"prot\": \"%s\", \"flags\": %u, \"status\": %u, \"kind\": \"%s\", \"lazy\": %s, "
			       "\"pages\": ",
			       i ? "," : "", v->start, v->end, prot, v->flags, v->status, vma_kind(v),
			       img_vma_can_be_lazy(v) ? "true" : "false");
			print_counts_json(&c);
			printf("}");
		}
		printf("]");
		for (size_t i = 0; i < mm->nr_pmes; i++)
			count_pme(tot, &mm->pmes[i], mm->pmes[i].nr_pages);
		printf(", \"pages\": ");
		print_counts_json(tot);
	}
	printf("}");
}

static void print_json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = *s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static int show(const char *dir, bool json)
{
	struct page_counts total = {0}, tc;
	struct img_task *tasks = NULL;
	struct img_dir *d = NULL;
	struct img_err err;
	size_t nr = 0;
	int ret = 1;

	if (img_dir_open(dir, &d, &err) || img_read_pstree(d, &tasks, &nr, &err)) {
		fprintf(stderr, "lazyrestore show: %s\n", err.msg);
		goto out;
	}
	if (json) {
		printf("{\n  \"images_dir\": ");
		print_json_string(dir);
		printf(",\n  \"tasks\": [");
	} else
		printf("images: %s, %zu task%s\n\n", dir, nr, nr == 1 ? "" : "s");
	for (size_t i = 0; i < nr; i++) {
		struct img_mm mm, *mmp = NULL;

		if (tasks[i].state != IMG_TASK_DEAD) {
			if (img_read_mm(d, tasks[i].pid, &mm, &err)) {
				fflush(stdout);
				fprintf(stderr, "lazyrestore show: %s\n", err.msg);
				goto out;
			}
			mmp = &mm;
		}
		if (json)
			print_task_json(&tasks[i], mmp, &tc, i == 0);
		else
			print_task_text(&tasks[i], mmp, &tc);
		add_counts(&total, &tc);
		if (mmp)
			img_mm_free(mmp);
		if (!json)
			printf("\n");
	}
	if (json) {
		printf("\n  ],\n  \"totals\": ");
		print_counts_json(&total);
		printf("\n}\n");
	} else {
		print_counts_text("total: ", &total);
	}
	ret = 0;
out:
	img_tasks_free(tasks, nr);
	img_dir_close(d);
	return ret;
}

int cmd_show(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	bool json = false;
	int c;

	while ((c = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'h':
			fputs(show_usage, stdout);
			return 0;
		default:
			fputs(show_usage, stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "lazyrestore show: expected one image directory\n\n%s", show_usage);
		return 2;
	}
	return show(argv[optind], json);
}

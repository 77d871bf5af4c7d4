// SPDX-License-Identifier: MIT
/* Stats: histogram arithmetic, JSON output and the log summary. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "plugin/engine/stats.h"
#include "plugin/log/log.h"

uint64_t lr_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double lr_now(void)
{
	return (double)lr_now_ns() / 1e9;
}

static unsigned bucket_of(uint64_t ns)
{
	if (ns < LR_HIST_SUB)
		return (unsigned)ns;
	unsigned msb = 63 - __builtin_clzll(ns); /* >= 4 */
	unsigned sub = (unsigned)(ns >> (msb - 4)) & (LR_HIST_SUB - 1);
	return (msb - 3) * LR_HIST_SUB + sub;
}

/* Upper edge of a bucket, in ns. */
static double bucket_top(unsigned b)
{
	if (b < LR_HIST_SUB)
		return b + 1;
	unsigned msb = b / LR_HIST_SUB + 3, sub = b % LR_HIST_SUB;
	return (double)((uint64_t)(LR_HIST_SUB + sub + 1) << (msb - 4));
}

void lr_stats_latency(struct lr_stats *s, uint64_t ns)
{
	s->hist[bucket_of(ns)]++;
	if (ns > s->lat_max_ns)
		s->lat_max_ns = ns;
}

double lr_stats_percentile(const struct lr_stats *s, double p)
{
	uint64_t n = 0, seen = 0;

	for (unsigned b = 0; b < LR_HIST_BUCKETS; b++)
		n += s->hist[b];
	if (!n)
		return 0;
	uint64_t want = (uint64_t)(p / 100.0 * n + 0.5);
	if (want < 1)
		want = 1;
	for (unsigned b = 0; b < LR_HIST_BUCKETS; b++) {
		seen += s->hist[b];
		if (seen >= want) {
			double top = bucket_top(b);
			return (top > s->lat_max_ns ? s->lat_max_ns : top) / 1000.0;
		}
	}
	return s->lat_max_ns / 1000.0;
}

static double since(const struct lr_stats *s, double t)
{
	return t > 0 ? t - s->t_start : -1;
}

/* A JSON string of our own text; quotes and backslashes become ' to keep it valid. */
static void put_text(FILE *f, const char *text)
{
	fputc('"', f);
	for (const char *p = text; *p; p++)
		fputc(*p == '"' || *p == '\\' ? '\'' : *p, f);
	fputc('"', f);
}

static void write_thp(FILE *f, const struct lr_stats *s)
{
	fprintf(f,
		"  \"thp_extents\": %llu,\n  \"thp_collapsed\": %llu,\n  \"thp_failed\": %llu,\n"
		"  \"thp_collapse_ms\": %.3f,\n  \"anon_huge_kib\": [",
		(unsigned long long)s->thp_extents, (unsigned long long)s->thp_collapsed,
		(unsigned long long)s->thp_failed, s->thp_collapse_ns / 1e6);
	for (unsigned i = 0; i < s->thp_nr; i++)
		fprintf(f, "%s{\"pid\": %u, \"kib\": %ld}", i ? ", " : "", s->thp_task[i].pid, s->thp_task[i].kib);
	fprintf(f, "],\n");
	fprintf(f,
		"  \"ws_pages\": %llu,\n  \"ws_skipped\": %llu,\n  \"ws_recorded\": %llu,\n"
		"  \"ws_gap_pages\": %llu,\n  \"ws_ms\": %.3f\n",
		(unsigned long long)s->ws_pages, (unsigned long long)s->ws_skipped, (unsigned long long)s->ws_recorded,
		(unsigned long long)s->ws_gap_pages, s->ws_ms);
}

int lr_stats_write_json(const struct lr_stats *s, const char *path)
{
	FILE *f = fopen(path, "w");

	if (!f) {
		pr_perror("can't write stats file %s", path);
		return -1;
	}
	fprintf(f,
		"{\n  \"total_pages\": %llu,\n  \"faults\": %llu,\n  \"fault_pages\": %llu,\n"
		"  \"fault_around_pages\": %llu,\n  \"prefetch_pages\": %llu,\n"
		"  \"zero_pages\": %llu,\n  \"eexist\": %llu,\n  \"bytes\": %llu,\n"
		"  \"forks\": %llu,\n  \"remaps\": %llu,\n  \"removes\": %llu,\n"
		"  \"unmaps\": %llu,\n  \"tasks_gone\": %llu,\n",
		(unsigned long long)s->total_pages, (unsigned long long)s->faults, (unsigned long long)s->fault_pages,
		(unsigned long long)s->fault_around_pages, (unsigned long long)s->prefetch_pages,
		(unsigned long long)s->zero_pages, (unsigned long long)s->eexist, (unsigned long long)s->bytes,
		(unsigned long long)s->forks, (unsigned long long)s->remaps, (unsigned long long)s->removes,
		(unsigned long long)s->unmaps, (unsigned long long)s->tasks_gone);
	fprintf(f,
		"  \"time_to_first_fault_s\": %.6f,\n  \"time_to_restore_finished_s\": %.6f,\n"
		"  \"time_to_all_resident_s\": %.6f,\n"
		"  \"all_resident_after_finished_s\": %.6f,\n"
		"  \"fault_latency_us\": {\"p50\": %.1f, \"p90\": %.1f, \"p99\": %.1f, \"max\": %.1f},\n",
		since(s, s->t_first_fault), since(s, s->t_finished), since(s, s->t_all_resident),
		s->t_all_resident > 0 && s->t_finished > 0 ? s->t_all_resident - s->t_finished : -1,
		lr_stats_percentile(s, 50), lr_stats_percentile(s, 90), lr_stats_percentile(s, 99),
		s->lat_max_ns / 1000.0);
	fprintf(f, "  \"gate\": {\"reads\": %llu, \"waited\": %llu, \"wait_mean_us\": %.1f, \"wait_max_us\": %.1f},\n",
		(unsigned long long)s->gate_reads, (unsigned long long)s->gate_waits,
		s->gate_waits ? s->gate_wait_ns / 1e3 / s->gate_waits : 0, s->gate_wait_max_ns / 1e3);
	fprintf(f, "  \"page_source\": \"%s\",\n  \"page_source_why\": ", s->source);
	put_text(f, s->source_why);
	fprintf(f, ",\n  \"workers_calm\": %s,\n  \"workers_why\": ", s->workers_calm ? "true" : "false");
	put_text(f, s->workers_why);
	fprintf(f, ",\n  \"fault_cpu\": \"%s\",\n  \"fault_cpu_why\": ", s->follow ? "follow" : "any");
	put_text(f, s->follow_why);
	fprintf(f, ",\n  \"fault_thread_moves\": %llu,\n  \"fault_thread_cpu\": %d,\n",
		(unsigned long long)s->fault_thread_moves, s->fault_thread_cpu);
	fprintf(f, "  \"prefetch_step_max_kib\": %llu,\n", (unsigned long long)(s->step_max >> 10));
	write_thp(f, s);
	fprintf(f, "}\n");
	if (fclose(f)) {
		pr_perror("can't write stats file %s", path);
		return -1;
	}
	return 0;
}

void lr_stats_log_summary(const struct lr_stats *s)
{
	pr_info("stats: %llu lazy pages; %llu faults (%llu pages + %llu fault-around), %llu "
		"prefetched, %llu zero, %llu already present; %llu MiB copied",
		(unsigned long long)s->total_pages, (unsigned long long)s->faults, (unsigned long long)s->fault_pages,
		(unsigned long long)s->fault_around_pages, (unsigned long long)s->prefetch_pages,
		(unsigned long long)s->zero_pages, (unsigned long long)s->eexist, (unsigned long long)(s->bytes >> 20));
	pr_info("stats: first fault after %.3f s, all resident after %.3f s (%.3f s after restore "
		"finished); fault latency p50 %.1f p90 %.1f p99 %.1f max %.1f us",
		since(s, s->t_first_fault), since(s, s->t_all_resident),
		s->t_all_resident > 0 && s->t_finished > 0 ? s->t_all_resident - s->t_finished : -1,
		lr_stats_percentile(s, 50), lr_stats_percentile(s, 90), lr_stats_percentile(s, 99),
		s->lat_max_ns / 1000.0);
	pr_info("stats: %llu uffd reads, %llu waited at the gate for a copy in flight (mean %.1f, max %.1f us)",
		(unsigned long long)s->gate_reads, (unsigned long long)s->gate_waits,
		s->gate_waits ? s->gate_wait_ns / 1e3 / s->gate_waits : 0, s->gate_wait_max_ns / 1e3);
}

// SPDX-License-Identifier: MIT
/*
 * fuzz_ws: the working-set file reader (images/ws.c), img_ws_parse() over the
 * input (the bytes after the magic words).  Whatever it accepts must keep the
 * promises of images/ws.h (pids strictly ascending and non-zero, page counts
 * and the total within their bounds, page-aligned user addresses) and encode
 * back to exactly the input; a refusal must say where and why.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "images/ws.h"
#include "test/fuzz/fuzz.h"

static void check_accepted(const uint8_t *data, size_t size, const struct img_ws *ws)
{
	uint64_t total = 0;
	uint8_t *buf;
	size_t len;
	struct img_err err;

	if (ws->nr_tasks > IMG_WS_MAX_TASKS)
		violation("%zu tasks accepted, bound %u", ws->nr_tasks, IMG_WS_MAX_TASKS);
	for (size_t i = 0; i < ws->nr_tasks; i++) {
		const struct img_ws_task *t = &ws->tasks[i];
		if (!t->pid || (i && t->pid <= ws->tasks[i - 1].pid))
			violation("task %zu: pid %u not ascending", i, t->pid);
		if (t->nr > IMG_WS_MAX_PAGES)
			violation("task %u: %u pages accepted", t->pid, t->nr);
		for (uint32_t k = 0; k < t->nr; k++)
			if (t->pages[k] & (IMG_PAGE_SIZE - 1) || t->pages[k] >= IMG_WS_MAX_ADDR)
				violation("task %u: page 0x%llx accepted", t->pid, (unsigned long long)t->pages[k]);
		if (img_ws_task(ws, t->pid) != t)
			violation("img_ws_task(%u) does not find it", t->pid);
		total += t->nr;
	}
	if (total > IMG_WS_MAX_TOTAL)
		violation("%llu pages accepted in all", (unsigned long long)total);
	if (img_ws_encode(ws, &buf, &len, &err))
		violation("accepted, but does not encode: %s", err.msg);
	if (len != size || memcmp(buf, data, len))
		violation("accepted %zu bytes, encodes to %zu different ones", size, len);
	free(buf);
}

static void one(const uint8_t *data, size_t size)
{
	struct img_ws ws;
	struct img_err err = {{0}};

	if (img_ws_parse(data, size, "fuzz/" IMG_WS_FILE, 8, &ws, &err)) {
		if (!strstr(err.msg, "fuzz/" IMG_WS_FILE ": offset "))
			violation("refusal without file and offset: '%s'", err.msg);
		if (ws.tasks || ws.nr_tasks)
			violation("refused, but tasks left allocated");
		if (getenv("FUZZ_VERBOSE"))
			fprintf(stderr, "refused: %s\n", err.msg);
		return;
	}
	check_accepted(data, size, &ws);
	img_ws_free(&ws);
}

/*
 * The input as it is, then with its checksum made right, so that the fuzzer
 * gets past the checksum to the records.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	one(data, size);
	if (size < IMG_WS_HEADER)
		return 0;
	uint8_t *fixed = malloc(size);
	uint64_t h = 0xcbf29ce484222325ULL;
	if (!fixed)
		fatal("out of memory");
	memcpy(fixed, data, size);
	for (size_t i = IMG_WS_HEADER; i < size; i++)
		h = (h ^ fixed[i]) * 0x100000001b3ULL;
	for (int i = 0; i < 8; i++)
		fixed[24 + i] = (uint8_t)(h >> (8 * i));
	one(fixed, size);
	free(fixed);
	return 0;
}

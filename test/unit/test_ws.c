// SPDX-License-Identifier: MIT
/*
 * Unit tests of images/ws.c, the working-set file: it reads back what it
 * wrote, a dump's identity changes with the dump, and each kind of damage is
 * refused with its own error naming the file and the offset.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "images/ws.h"
#include "inventory.pb-c.h"

#define WORK TOP_DIR "/build/test-work/unit-ws"

static uint64_t pages_a[] = {0x7f0000005000, 0x7f0000001000, 0x7f0000002000};
static uint64_t pages_b[] = {0x400000};
static struct img_ws_task tasks[] = {{12, 3, pages_a}, {40, 1, pages_b}};
static const struct img_ws sample = {0x1122334455667788ULL, 2, tasks};

/* ---- a minimal dump directory: inventory.img and pstree.img --------- */

static void put32(FILE *f, uint32_t v)
{
	assert_int_equal(fwrite(&v, 4, 1, f), 1);
}

static void write_inventory(const char *dir, uint64_t uptime)
{
	InventoryEntry ie = INVENTORY_ENTRY__INIT;
	char path[1024];
	uint8_t buf[256];

	ie.img_version = 2;
	ie.has_fdinfo_per_id = true;
	ie.fdinfo_per_id = true;
	ie.has_dump_uptime = true;
	ie.dump_uptime = uptime;
	size_t n = inventory_entry__pack(&ie, buf);
	snprintf(path, sizeof(path), "%s/inventory.img", dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	put32(f, IMG_INVENTORY_MAGIC);
	put32(f, (uint32_t)n);
	assert_int_equal(fwrite(buf, 1, n, f), n);
	fclose(f);
	snprintf(path, sizeof(path), "%s/pstree.img", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	put32(f, IMG_COMMON_MAGIC);
	put32(f, IMG_PSTREE_MAGIC);
	fclose(f);
}

static struct img_dir *make_dir(const char *name, uint64_t uptime)
{
	char path[512], cmd[1200];
	struct img_dir *d;
	struct img_err err;

	snprintf(path, sizeof(path), "%s/%s", WORK, name);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' && mkdir -p '%s'", path, path);
	assert_int_equal(system(cmd), 0);
	write_inventory(path, uptime);
	if (img_dir_open(path, &d, &err))
		fail_msg("%s", err.msg);
	return d;
}

/* ---- encode / parse ------------------------------------------------- */

static void same(const struct img_ws *a, const struct img_ws *b)
{
	assert_int_equal(a->ident, b->ident);
	assert_int_equal(a->nr_tasks, b->nr_tasks);
	for (size_t i = 0; i < a->nr_tasks; i++) {
		assert_int_equal(a->tasks[i].pid, b->tasks[i].pid);
		assert_int_equal(a->tasks[i].nr, b->tasks[i].nr);
		assert_memory_equal(a->tasks[i].pages, b->tasks[i].pages, a->tasks[i].nr * sizeof(uint64_t));
	}
}

static void test_roundtrip(void **state)
{
	struct img_ws ws;
	struct img_err err;
	uint8_t *buf;
	size_t len;

	(void)state;
	assert_int_equal(img_ws_encode(&sample, &buf, &len, &err), 0);
	assert_int_equal(len, IMG_WS_HEADER + 2 * 8 + 4 * 8);
	assert_int_equal(img_ws_parse(buf, len, "x", 8, &ws, &err), 0);
	same(&sample, &ws);
	assert_ptr_equal(img_ws_task(&ws, 40), &ws.tasks[1]);
	assert_null(img_ws_task(&ws, 13));
	img_ws_free(&ws);
	free(buf);
}

/* FNV-1a 64 of the body, as the writer puts it in the header */
static void fix_sum(uint8_t *buf, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = IMG_WS_HEADER; i < len; i++)
		h = (h ^ buf[i]) * 0x100000001b3ULL;
	memcpy(buf + 24, &h, 8);
}

struct damage {
	const char *what;
	size_t at;	 /* byte to change (in the encoded sample) */
	uint32_t value;	 /* u32 written there */
	int resum;	 /* recompute the checksum after */
	long cut;	 /* bytes cut from the end (negative: added) */
	const char *err; /* expected "x: offset N: ..." */
};

static const struct damage damages[] = {
    {"short header", 0, 1, 0, 56, "x: offset 8: truncated header (24 bytes, need 32)"},
    {"version", 0, 2, 0, 0, "x: offset 8: version 2, this reader knows 1"},
    {"too many tasks", 4, IMG_WS_MAX_TASKS + 1, 0, 0, "x: offset 12: 4097 tasks, more than the bound of 4096"},
    {"checksum", 40, 0x1000, 0, 0, "x: offset 32: checksum"},
    {"tasks announced", 4, 9, 1, 0, "x: offset 12: 9 tasks announced, 48 bytes follow"},
    {"pid order", 64, 12, 1, 0, "x: offset 72: task pid 12 not above the previous one (12)"},
    {"pid zero", 32, 0, 1, 0, "x: offset 40: task pid 0 not above the previous one (0)"},
    {"pages bound", 36, IMG_WS_MAX_PAGES + 1, 1, 0, "x: offset 44: task 12: 262145 pages, more than the bound"},
    {"pages announced", 68, 5, 1, 0, "x: offset 80: task 40: 5 pages announced, 8 bytes left"},
    {"unaligned page", 48, 0x1234, 1, 0,
     "x: offset 56: task 12: page 1 at 0x7f0000001234 is not a page-aligned user address"},
    {"total", 16, 5, 1, 0, "x: offset 24: header says 5 pages, the tasks hold 4"},
    {"trailing bytes", 0, 1, 1, -8, "x: offset 88: 8 bytes after the last task"},
    {"cut task", 0, 1, 1, 4, "x: offset 80: task 40: 1 pages announced, 4 bytes left"},
};

static void test_damage(void **state)
{
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(damages) / sizeof(damages[0]); i++) {
		const struct damage *dm = &damages[i];
		struct img_ws ws;
		struct img_err err;
		uint8_t *buf, *big;
		size_t len;

		assert_int_equal(img_ws_encode(&sample, &buf, &len, &err), 0);
		big = calloc(1, len + 8);
		assert_non_null(big);
		memcpy(big, buf, len);
		memcpy(big + dm->at, &dm->value, 4);
		len -= dm->cut;
		if (dm->resum)
			fix_sum(big, len);
		err.msg[0] = 0;
		int r = img_ws_parse(big, len, "x", 8, &ws, &err);
		if (r != -1 || !strstr(err.msg, dm->err)) {
			print_error("%s: got %d '%s', want '%s'\n", dm->what, r, err.msg, dm->err);
			bad++;
		}
		assert_null(ws.tasks);
		free(big);
		free(buf);
	}
	assert_int_equal(bad, 0);
}

static void test_encode_refuses(void **state)
{
	struct img_ws_task bad[] = {{5, 1, pages_b}, {5, 1, pages_b}};
	struct img_ws ws = {1, 2, bad};
	struct img_err err;
	uint8_t *buf;
	size_t len;

	(void)state;
	assert_int_equal(img_ws_encode(&ws, &buf, &len, &err), -1);
	assert_non_null(strstr(err.msg, "breaks the format's rules"));
}

/* ---- the file next to a dump ---------------------------------------- */

static void test_dir(void **state)
{
	struct img_dir *d = make_dir("a", 1000), *other = make_dir("b", 2000);
	struct img_ws ws, in = sample;
	struct img_err err;
	uint64_t ia, ia2, ib;
	char path[512];

	(void)state;
	assert_int_equal(img_ws_read(d, &ws, &err), 1); /* none yet */
	assert_int_equal(img_ws_ident(d, &ia, &err), 0);
	assert_int_equal(img_ws_ident(d, &ia2, &err), 0);
	assert_int_equal(img_ws_ident(other, &ib, &err), 0);
	assert_int_equal(ia, ia2);
	assert_true(ia != ib); /* another dump (dump_uptime) */
	in.ident = ia;
	assert_int_equal(img_ws_write(d, &in, &err), 0);
	assert_int_equal(img_ws_read(d, &ws, &err), 0);
	same(&in, &ws);
	img_ws_free(&ws);
	snprintf(path, sizeof(path), "%s/a/%s.tmp", WORK, IMG_WS_FILE);
	assert_int_equal(access(path, F_OK), -1); /* renamed, not left */

	/* a file of another kind: its magic is refused with name and offset */
	snprintf(path, sizeof(path), "%s/a/%s", WORK, IMG_WS_FILE);
	int fd = open(path, O_WRONLY);
	uint32_t junk = 0x12345678;
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, &junk, 4, 4), 4);
	close(fd);
	assert_int_equal(img_ws_read(d, &ws, &err), -1);
	assert_non_null(strstr(err.msg, "/a/" IMG_WS_FILE ": offset 4: bad image magic 0x12345678"));

	/* damage past the magic: the offset is the file's, not the body's */
	assert_int_equal(img_ws_write(d, &in, &err), 0);
	fd = open(path, O_WRONLY);
	junk = 3;
	assert_int_equal(pwrite(fd, &junk, 4, 8), 4);
	close(fd);
	assert_int_equal(img_ws_read(d, &ws, &err), -1);
	assert_non_null(strstr(err.msg, ": offset 8: version 3"));
	img_dir_close(d);
	img_dir_close(other);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_roundtrip),
	    cmocka_unit_test(test_damage),
	    cmocka_unit_test(test_encode_refuses),
	    cmocka_unit_test(test_dir),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

// SPDX-License-Identifier: MIT
/* The working-set file (ws.h): checked reader, writer and the dump's identity. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "images/internal.h"
#include "images/ws.h"

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME  0x100000001b3ULL

static uint64_t fnv(uint64_t h, const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * FNV_PRIME;
	return h;
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

int img_ws_ident(struct img_dir *d, uint64_t *ident, struct img_err *err)
{
	static const struct {
		const char *name;
		uint32_t magic;
	} files[] = {{"inventory.img", IMG_INVENTORY_MAGIC}, {"pstree.img", IMG_PSTREE_MAGIC}};
	uint64_t h = FNV_OFFSET;

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		struct img_file f;
		if (img_file_open(d, files[i].name, files[i].magic, &f, NULL, err))
			return -1;
		h = fnv(h, f.buf, f.len);
		img_file_close(&f);
	}
	*ident = h;
	return 0;
}

void img_ws_free(struct img_ws *ws)
{
	for (size_t i = 0; i < ws->nr_tasks; i++)
		free(ws->tasks[i].pages);
	free(ws->tasks);
	memset(ws, 0, sizeof(*ws));
}

const struct img_ws_task *img_ws_task(const struct img_ws *ws, uint32_t pid)
{
	size_t lo = 0, hi = ws->nr_tasks;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (ws->tasks[mid].pid == pid)
			return &ws->tasks[mid];
		if (ws->tasks[mid].pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static int parse_task(const uint8_t *buf, size_t len, size_t *pos, const char *name, size_t base, struct img_ws_task *t,
		      uint32_t prev_pid, uint64_t *total, struct img_err *err)
{
	size_t p = *pos;

	if (len - p < 8)
		return img_fail(err, name, base + p, "truncated task record (%zu bytes left, need 8)", len - p);
	t->pid = le32(buf + p);
	t->nr = le32(buf + p + 4);
	if (!t->pid || t->pid <= prev_pid)
		return img_fail(err, name, base + p, "task pid %u not above the previous one (%u)", t->pid, prev_pid);
	if (t->nr > IMG_WS_MAX_PAGES)
		return img_fail(err, name, base + p + 4, "task %u: %u pages, more than the bound of %u", t->pid, t->nr,
				IMG_WS_MAX_PAGES);
	*total += t->nr;
	if (*total > IMG_WS_MAX_TOTAL)
		return img_fail(err, name, base + p + 4, "more than %u pages in all", IMG_WS_MAX_TOTAL);
	p += 8;
	if ((len - p) / 8 < t->nr) /* before allocating: the file must hold them */
		return img_fail(err, name, base + p, "task %u: %u pages announced, %zu bytes left", t->pid, t->nr,
				len - p);
	t->pages = malloc((t->nr ? t->nr : 1) * sizeof(uint64_t));
	if (!t->pages)
		return img_fail(err, name, base + p, "out of memory for %u pages", t->nr);
	for (uint32_t i = 0; i < t->nr; i++, p += 8) {
		uint64_t a = le64(buf + p);
		if (a & (IMG_PAGE_SIZE - 1) || a >= IMG_WS_MAX_ADDR)
			return img_fail(err, name, base + p,
					"task %u: page %u at 0x%llx is not a page-aligned user address", t->pid, i,
					(unsigned long long)a);
		t->pages[i] = a;
	}
	*pos = p;
	return 0;
}

int img_ws_parse(const uint8_t *buf, size_t len, const char *name, size_t base, struct img_ws *ws, struct img_err *err)
{
	uint64_t total = 0;
	size_t pos = IMG_WS_HEADER;

	memset(ws, 0, sizeof(*ws));
	if (len < IMG_WS_HEADER)
		return img_fail(err, name, base, "truncated header (%zu bytes, need %u)", len, IMG_WS_HEADER);
	uint32_t version = le32(buf), nr = le32(buf + 4);
	if (version != IMG_WS_VERSION)
		return img_fail(err, name, base, "version %u, this reader knows %u", version, IMG_WS_VERSION);
	if (nr > IMG_WS_MAX_TASKS)
		return img_fail(err, name, base + 4, "%u tasks, more than the bound of %u", nr, IMG_WS_MAX_TASKS);
	uint64_t sum = le64(buf + 24), want = fnv(FNV_OFFSET, buf + IMG_WS_HEADER, len - IMG_WS_HEADER);
	if (sum != want)
		return img_fail(err, name, base + 24, "checksum 0x%016llx, the contents give 0x%016llx",
				(unsigned long long)sum, (unsigned long long)want);
	if ((len - IMG_WS_HEADER) / 8 < nr)
		return img_fail(err, name, base + 4, "%u tasks announced, %zu bytes follow", nr, len - IMG_WS_HEADER);
	ws->ident = le64(buf + 8);
	ws->tasks = calloc(nr ? nr : 1, sizeof(*ws->tasks));
	if (!ws->tasks)
		return img_fail(err, name, base + 4, "out of memory for %u tasks", nr);
	for (uint32_t i = 0; i < nr; i++) {
		ws->nr_tasks = i + 1; /* so that img_ws_free() frees a partly read task too */
		if (parse_task(buf, len, &pos, name, base, &ws->tasks[i], i ? ws->tasks[i - 1].pid : 0, &total, err))
			goto fail;
	}
	if (total != le64(buf + 16)) {
		img_fail(err, name, base + 16, "header says %llu pages, the tasks hold %llu",
			 (unsigned long long)le64(buf + 16), (unsigned long long)total);
		goto fail;
	}
	if (pos != len) {
		img_fail(err, name, base + pos, "%zu bytes after the last task", len - pos);
		goto fail;
	}
	return 0;
fail:
	img_ws_free(ws);
	return -1;
}

int img_ws_read(struct img_dir *d, struct img_ws *ws, struct img_err *err)
{
	struct img_file f;
	int missing;

	memset(ws, 0, sizeof(*ws));
	if (img_file_open(d, IMG_WS_FILE, IMG_WS_MAGIC, &f, &missing, err))
		return -1;
	if (missing)
		return 1;
	int ret = img_ws_parse(f.buf + f.pos, f.len - f.pos, f.name, f.pos, ws, err);
	img_file_close(&f);
	return ret;
}

int img_ws_encode(const struct img_ws *ws, uint8_t **out, size_t *outlen, struct img_err *err)
{
	uint64_t total = 0;

	if (ws->nr_tasks > IMG_WS_MAX_TASKS)
		return img_fail(err, IMG_WS_FILE, 0, "%zu tasks, more than the bound of %u", ws->nr_tasks,
				IMG_WS_MAX_TASKS);
	for (size_t i = 0; i < ws->nr_tasks; i++) {
		const struct img_ws_task *t = &ws->tasks[i];
		if (t->nr > IMG_WS_MAX_PAGES || !t->pid || (i && t->pid <= ws->tasks[i - 1].pid))
			return img_fail(err, IMG_WS_FILE, 0, "task %zu (pid %u, %u pages) breaks the format's rules", i,
					t->pid, t->nr);
		total += t->nr;
	}
	if (total > IMG_WS_MAX_TOTAL)
		return img_fail(err, IMG_WS_FILE, 0, "%llu pages, more than the bound of %u", (unsigned long long)total,
				IMG_WS_MAX_TOTAL);
	size_t len = IMG_WS_HEADER + ws->nr_tasks * 8 + total * 8, p = IMG_WS_HEADER;
	uint8_t *buf = malloc(len);
	if (!buf)
		return img_fail(err, IMG_WS_FILE, 0, "out of memory for %zu bytes", len);
	for (size_t i = 0; i < ws->nr_tasks; i++) {
		const struct img_ws_task *t = &ws->tasks[i];
		put32(buf + p, t->pid);
		put32(buf + p + 4, t->nr);
		p += 8;
		for (uint32_t k = 0; k < t->nr; k++, p += 8)
			put64(buf + p, t->pages[k]);
	}
	put32(buf, IMG_WS_VERSION);
	put32(buf + 4, (uint32_t)ws->nr_tasks);
	put64(buf + 8, ws->ident);
	put64(buf + 16, total);
	put64(buf + 24, fnv(FNV_OFFSET, buf + IMG_WS_HEADER, len - IMG_WS_HEADER));
	*out = buf;
	*outlen = len;
	return 0;
}

static int write_all(int fd, const uint8_t *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int img_ws_write(struct img_dir *d, const struct img_ws *ws, struct img_err *err)
{
	const char *tmp = IMG_WS_FILE ".tmp";
	char name[512];
	uint8_t magic[8], *buf;
	size_t len, nm = 0;
	int ret = -1;

	snprintf(name, sizeof(name), "%s/%s", d->path, tmp);
	if (img_ws_encode(ws, &buf, &len, err))
		return -1;
	if (d->img_version != 1) /* framed as the dump's other files (images/file.c) */
		put32(magic + nm, IMG_COMMON_MAGIC), nm += 4;
	put32(magic + nm, IMG_WS_MAGIC);
	nm += 4;
	int fd = openat(d->fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		img_fail(err, name, 0, "cannot create: %s", strerror(errno));
		goto out;
	}
	if (write_all(fd, magic, nm) || write_all(fd, buf, len) || fsync(fd)) {
		img_fail(err, name, 0, "write failed: %s", strerror(errno ? errno : EIO));
		close(fd);
		goto unlink;
	}
	if (close(fd)) {
		img_fail(err, name, 0, "write failed: %s", strerror(errno));
		goto unlink;
	}
	if (renameat(d->fd, tmp, d->fd, IMG_WS_FILE)) {
		img_fail(err, name, 0, "cannot rename to %s: %s", IMG_WS_FILE, strerror(errno));
		goto unlink;
	}
	ret = 0;
	goto out;
unlink:
	unlinkat(d->fd, tmp, 0);
out:
	free(buf);
	return ret;
}

// SPDX-License-Identifier: MIT
/* The working-set file (ws.h): checked reader, writer and the dump's identity. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* Write name (relative to dirfd) atomically: name.tmp, then renamed; shown is the name in errors. */
static int write_at(int dirfd, const char *name, const char *shown, const struct img_ws *ws, bool common,
		    struct img_err *err)
{
	char tmp[4096];
	uint8_t magic[8], *buf;
	size_t len, nm = 0;
	int ret = -1;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", name) >= sizeof(tmp))
		return img_fail(err, shown, 0, "path too long");
	if (img_ws_encode(ws, &buf, &len, err))
		return -1;
	if (common) /* framed as the dump's other files (images/file.c) */
		put32(magic + nm, IMG_COMMON_MAGIC), nm += 4;
	put32(magic + nm, IMG_WS_MAGIC);
	nm += 4;
	int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		img_fail(err, shown, 0, "cannot create %s: %s", tmp, strerror(errno));
		goto out;
	}
	if (write_all(fd, magic, nm) || write_all(fd, buf, len) || fsync(fd)) {
		img_fail(err, shown, 0, "write failed: %s", strerror(errno ? errno : EIO));
		close(fd);
		goto unlink;
	}
	if (close(fd)) {
		img_fail(err, shown, 0, "write failed: %s", strerror(errno));
		goto unlink;
	}
	if (renameat(dirfd, tmp, dirfd, name)) {
		img_fail(err, shown, 0, "cannot rename %s to it: %s", tmp, strerror(errno));
		goto unlink;
	}
	ret = 0;
	goto out;
unlink:
	unlinkat(dirfd, tmp, 0);
out:
	free(buf);
	return ret;
}

int img_ws_write(struct img_dir *d, const struct img_ws *ws, struct img_err *err)
{
	char name[4096];

	snprintf(name, sizeof(name), "%s/%s", d->path, IMG_WS_FILE);
	return write_at(d->fd, IMG_WS_FILE, name, ws, d->img_version != 1, err);
}

int img_ws_write_file(const char *path, const struct img_ws *ws, struct img_err *err)
{
	return write_at(AT_FDCWD, path, path, ws, true, err);
}

int img_ws_read_file(const char *path, struct img_ws *ws, struct img_err *err)
{
	/* the largest valid file: both magics, the header, every task and page */
	const size_t max = 8 + IMG_WS_HEADER + (size_t)IMG_WS_MAX_TASKS * 8 + (size_t)IMG_WS_MAX_TOTAL * 8;
	struct stat st;
	size_t len = 0, pos = 0;
	uint8_t *buf = NULL;
	int ret = -1;

	memset(ws, 0, sizeof(*ws));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return img_fail(err, path, 0, "cannot open: %s", strerror(errno));
	if (fstat(fd, &st)) {
		img_fail(err, path, 0, "cannot stat: %s", strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
		img_fail(err, path, 0, "%s (%lld bytes; a working-set file is at most %zu)",
			 S_ISREG(st.st_mode) ? "too large" : "not a regular file", (long long)st.st_size, max);
		goto out;
	}
	buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!buf) {
		img_fail(err, path, 0, "out of memory for %lld bytes", (long long)st.st_size);
		goto out;
	}
	while (len < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + len, (size_t)st.st_size - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			img_fail(err, path, len, "read failed: %s", n ? strerror(errno) : "file shrank");
			goto out;
		}
		len += (size_t)n;
	}
	if (len >= 4 && le32(buf) == IMG_COMMON_MAGIC)
		pos = 4;
	if (len - pos < 4 || le32(buf + pos) != IMG_WS_MAGIC) {
		img_fail(err, path, pos, "not a working-set file (magic 0x%08x, want 0x%08x)",
			 len - pos >= 4 ? le32(buf + pos) : 0, IMG_WS_MAGIC);
		goto out;
	}
	pos += 4;
	ret = img_ws_parse(buf + pos, len - pos, path, pos, ws, err);
out:
	free(buf);
	close(fd);
	return ret;
}

// SPDX-License-Identifier: MIT
/* Framing of CRIU image files: magic words, then u32-length-prefixed protobuf records. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "images/internal.h"

int img_fail(struct img_err *err, const char *file, uint64_t off, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!err)
		return -1;
	n = snprintf(err->msg, sizeof(err->msg), "%s: offset %llu: ", file, (unsigned long long)off);
	if (n < 0 || (size_t)n >= sizeof(err->msg))
		return -1;
	va_start(ap, fmt);
	vsnprintf(err->msg + n, sizeof(err->msg) - n, fmt, ap);
	va_end(ap);
	return -1;
}

static int read_all(int fd, uint8_t *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = read(fd, buf + done, len - done);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		done += r;
	}
	return 0;
}

static uint32_t get_u32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v)); /* host order, as CRIU writes it */
	return v;
}

static int check_magic(struct img_dir *d, struct img_file *f, uint32_t magic, struct img_err *err)
{
	bool want_common = magic != IMG_INVENTORY_MAGIC && d->img_version != 1;

	if (want_common) {
		if (f->len < 4)
			return img_fail(err, f->name, 0, "truncated: no magic (file has %zu bytes)", f->len);
		if (get_u32(f->buf) != IMG_COMMON_MAGIC)
			return img_fail(err, f->name, 0, "bad common magic 0x%08x, want 0x%08x", get_u32(f->buf),
					IMG_COMMON_MAGIC);
		f->pos = 4;
	}
	if (f->len < f->pos + 4)
		return img_fail(err, f->name, f->pos, "truncated: no image magic (file has %zu bytes)", f->len);
	if (get_u32(f->buf + f->pos) != magic)
		return img_fail(err, f->name, f->pos, "bad image magic 0x%08x, want 0x%08x", get_u32(f->buf + f->pos),
				magic);
	f->pos += 4;
	return 0;
}

int img_file_open(struct img_dir *d, const char *name, uint32_t magic, struct img_file *f, int *missing,
		  struct img_err *err)
{
	struct stat st;
	int fd;

	memset(f, 0, sizeof(*f));
	snprintf(f->name, sizeof(f->name), "%s/%s", d->path, name);
	if (missing)
		*missing = 0;

	fd = openat(d->fd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT && missing) {
			*missing = 1;
			return 0;
		}
		return img_fail(err, f->name, 0, "cannot open: %s", strerror(errno));
	}
	if (fstat(fd, &st) < 0) {
		img_fail(err, f->name, 0, "cannot stat: %s", strerror(errno));
		goto out_close;
	}
	if (!S_ISREG(st.st_mode)) {
		img_fail(err, f->name, 0, "not a regular file");
		goto out_close;
	}
	if ((uint64_t)st.st_size > IMG_MAX_META_FILE) {
		img_fail(err, f->name, 0, "file of %lld bytes is larger than the %lu-byte bound for image files",
			 (long long)st.st_size, IMG_MAX_META_FILE);
		goto out_close;
	}
	f->len = st.st_size;
	f->buf = malloc(f->len ? f->len : 1);
	if (!f->buf) {
		img_fail(err, f->name, 0, "out of memory for %zu bytes", f->len);
		goto out_close;
	}
	if (read_all(fd, f->buf, f->len)) {
		img_fail(err, f->name, 0, "read failed: %s", errno ? strerror(errno) : "file shrank while read");
		goto out_free;
	}
	close(fd);
	if (check_magic(d, f, magic, err)) {
		img_file_close(f);
		return -1;
	}
	return 0;

out_free:
	free(f->buf);
	f->buf = NULL;
out_close:
	close(fd);
	return -1;
}

void img_file_close(struct img_file *f)
{
	free(f->buf);
	f->buf = NULL;
}

int img_file_next(struct img_file *f, const uint8_t **rec, size_t *len, size_t *off, struct img_err *err)
{
	uint32_t n;

	if (f->pos == f->len)
		return 0;
	if (f->len - f->pos < 4)
		return img_fail(err, f->name, f->pos, "truncated record: %zu bytes where a 4-byte length belongs",
				f->len - f->pos);
	n = get_u32(f->buf + f->pos);
	if (n > IMG_MAX_ENTRY)
		return img_fail(err, f->name, f->pos, "record length %u exceeds the %u-byte bound", n, IMG_MAX_ENTRY);
	if (n > f->len - f->pos - 4)
		return img_fail(err, f->name, f->pos, "record length %u runs past the end of the file (%zu bytes left)",
				n, f->len - f->pos - 4);
	*off = f->pos;
	*rec = f->buf + f->pos + 4;
	*len = n;
	f->pos += 4 + (size_t)n;
	return 1;
}

int img_file_next_msg(struct img_file *f, const ProtobufCMessageDescriptor *desc, bool required, void **msg,
		      size_t *off, struct img_err *err)
{
	const uint8_t *rec;
	size_t len;
	int r = img_file_next(f, &rec, &len, off, err);

	if (r <= 0) {
		if (r == 0 && required)
			return img_fail(err, f->name, f->pos, "no %s record", desc->name);
		return r;
	}
	*msg = protobuf_c_message_unpack(desc, NULL, len, rec);
	if (!*msg)
		return img_fail(err, f->name, *off, "malformed %s record (%zu bytes)", desc->name, len);
	return 1;
}

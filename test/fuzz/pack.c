// SPDX-License-Identifier: MIT
/*
 * fuzz-pack DIR > INPUT: pack the image files of a dump directory into one
 * fuzz_images input (framing in frame.h).  Files the reader does not look at
 * are left out; pages files are recorded by size only.  Used to make the
 * seed corpus from real dumps (test/fuzz/make-corpus.sh).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test/fuzz/frame.h"

static int kind_of(const char *name, uint32_t *id)
{
	static const struct {
		const char *prefix;
		enum fz_kind kind;
	} numbered[] = {{"core-", FZ_CORE}, {"mm-", FZ_MM}, {"pagemap-", FZ_PAGEMAP}, {"pages-", FZ_PAGES}};
	char *end;

	*id = 0;
	if (!strcmp(name, "inventory.img"))
		return FZ_INVENTORY;
	if (!strcmp(name, "pstree.img"))
		return FZ_PSTREE;
	for (size_t i = 0; i < sizeof(numbered) / sizeof(numbered[0]); i++) {
		size_t n = strlen(numbered[i].prefix);

		if (strncmp(name, numbered[i].prefix, n) || name[n] < '0' || name[n] > '9')
			continue;
		errno = 0;
		unsigned long v = strtoul(name + n, &end, 10);
		if (errno || v > UINT32_MAX || strcmp(end, ".img"))
			return -1;
		*id = v;
		return numbered[i].kind;
	}
	return -1;
}

static void put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = v >> (8 * i);
}

static int emit(int kind, uint32_t id, const uint8_t *data, size_t len)
{
	uint8_t hdr[FZ_HDR_LEN];

	hdr[0] = kind;
	put_u32(hdr + 1, id);
	put_u32(hdr + 5, len);
	return fwrite(hdr, 1, sizeof(hdr), stdout) != sizeof(hdr) || fwrite(data, 1, len, stdout) != len ? -1 : 0;
}

static int pack_file(int dfd, const char *dir, const char *name, int kind, uint32_t id)
{
	struct stat st;
	uint8_t *buf = NULL, size[8];
	int fd, ret = -1;
	ssize_t r;

	fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "fuzz-pack: %s/%s: %s\n", dir, name, strerror(errno));
		goto out;
	}
	if (kind == FZ_PAGES) {
		for (int i = 0; i < 8; i++)
			size[i] = (uint64_t)st.st_size >> (8 * i);
		ret = emit(kind, id, size, sizeof(size));
		goto out;
	}
	if (st.st_size > (16 << 20)) {
		fprintf(stderr, "fuzz-pack: %s/%s: %lld bytes is too big to pack\n", dir, name, (long long)st.st_size);
		goto out;
	}
	buf = malloc(st.st_size ? st.st_size : 1);
	if (!buf)
		goto out;
	r = read(fd, buf, st.st_size);
	if (r != st.st_size) {
		fprintf(stderr, "fuzz-pack: %s/%s: short read\n", dir, name);
		goto out;
	}
	ret = emit(kind, id, buf, st.st_size);
out:
	free(buf);
	if (fd >= 0)
		close(fd);
	return ret;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
	struct dirent **ents;
	int n, dfd, ret = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: fuzz-pack DUMP_DIR > INPUT\n");
		return 2;
	}
	dfd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	n = dfd < 0 ? -1 : scandir(argv[1], &ents, NULL, by_name);
	if (n < 0) {
		fprintf(stderr, "fuzz-pack: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	/* inventory first, so a truncated input still opens */
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < n; i++) {
			uint32_t id;
			int kind = kind_of(ents[i]->d_name, &id);

			if (kind < 0 || (kind == FZ_INVENTORY) != (pass == 0))
				continue;
			if (pack_file(dfd, argv[1], ents[i]->d_name, kind, id))
				ret = 1;
		}
	for (int i = 0; i < n; i++)
		free(ents[i]);
	free(ents);
	close(dfd);
	if (fflush(stdout) || ret) {
		fprintf(stderr, "fuzz-pack: %s: packing failed\n", argv[1]);
		return 1;
	}
	return 0;
}

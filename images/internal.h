/* SPDX-License-Identifier: MIT */
/* Private to images/: record framing and error helpers. */
#ifndef LAZYRESTORE_IMAGES_INTERNAL_H
#define LAZYRESTORE_IMAGES_INTERNAL_H

#include <stdint.h>
#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

#include "images/image.h"

struct img_dir {
	char *path;
	int fd;
	uint32_t img_version; /* from inventory.img; 1 means no common magic */
};

/* A whole image file read into memory, walked record by record. */
struct img_file {
	char name[256]; /* as shown in errors: "DIR/NAME" */
	uint8_t *buf;
	size_t len;
	size_t pos;
};

__attribute__((format(printf, 4, 5))) int img_fail(struct img_err *err, const char *file, uint64_t off, const char *fmt,
						   ...);

/*
 * Open DIR/name and check its magic words: the common magic (unless the
 * dump is img_version 1 or magic is the inventory's) followed by `magic`.
 * A missing file fails with "No such file" unless *missing is non-NULL, in
 * which case it is set and 0 is returned with f->buf NULL.
 */
int img_file_open(struct img_dir *d, const char *name, uint32_t magic, struct img_file *f, int *missing,
		  struct img_err *err);
void img_file_close(struct img_file *f);

/*
 * Next length-prefixed record: 1 with rec, len and off set, 0 at a clean end
 * of file, -1 on a truncated or oversized record.
 */
int img_file_next(struct img_file *f, const uint8_t **rec, size_t *len, size_t *off, struct img_err *err);

/*
 * Next record unpacked as a `desc` message (free with
 * protobuf_c_message_free_unpacked): 1 with *msg and *off set, 0 at a clean
 * end of file (an error "no <message> record" if required), -1 on a bad record.
 */
int img_file_next_msg(struct img_file *f, const ProtobufCMessageDescriptor *desc, bool required, void **msg,
		      size_t *off, struct img_err *err);

#endif

// SPDX-License-Identifier: MIT
/*
 * Per-thread description of the last failure.  Built without stdio so that
 * it can be recorded from inside a SIGBUS handler.
 */
#include <errno.h>
#include <string.h>

#include "lib/userfault/internal.h"

#define UF_ERR_LEN 192

static __thread char uf_err[UF_ERR_LEN] __attribute__((tls_model("initial-exec")));

struct buf {
	char *p;
	size_t left;
};

static void put_str(struct buf *b, const char *s)
{
	while (*s && b->left > 1) {
		*b->p++ = *s++;
		b->left--;
	}
	*b->p = '\0';
}

static void put_hex(struct buf *b, uintptr_t v)
{
	char tmp[2 + 2 * sizeof(v) + 1];
	char *t = tmp + sizeof(tmp) - 1;

	*t = '\0';
	do {
		*--t = "0123456789abcdef"[v & 0xf];
		v >>= 4;
	} while (v);
	*--t = 'x';
	*--t = '0';
	put_str(b, t);
}

int uf_fail(int err, const char *fn, const char *what, const void *addr)
{
	struct buf b = {uf_err, sizeof(uf_err)};
	const char *name = strerrorname_np(err);

	put_str(&b, fn);
	put_str(&b, ": ");
	put_str(&b, what);
	if (addr) {
		put_str(&b, " ");
		put_hex(&b, (uintptr_t)addr);
	}
	put_str(&b, " (");
	put_str(&b, name ? name : "unknown errno");
	put_str(&b, ")");
	errno = err;
	return -1;
}

const char *uf_last_error(void)
{
	return uf_err[0] ? uf_err : "no error";
}

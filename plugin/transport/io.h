/* SPDX-License-Identifier: MIT */
/*
 * One page-server connection's byte stream: plain TCP, or TLS over it with
 * CRIU's options and semantics (criu/tls.c: X.509 on both sides, the client
 * certificate required, CN checked against the address unless
 * --tls-no-cn-verify).  Used by our page server and our client.
 */
#ifndef LAZYRESTORE_TRANSPORT_IO_H
#define LAZYRESTORE_TRANSPORT_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* CRIU's --tls options; NULL paths mean CRIU's defaults under /etc/pki. */
struct lr_tls_opts {
	bool on;
	bool no_cn_verify;
	const char *cacert, *cacrl, *cert, *key;
};

/* getopt_long entries for the --tls* options, their ids from base up. */
#define LR_TLS_LONGOPTS(base)                                                                                      \
	{"tls", no_argument, NULL, (base)}, {"tls-cacert", required_argument, NULL, (base) + 1},                   \
	    {"tls-cacrl", required_argument, NULL, (base) + 2}, {"tls-cert", required_argument, NULL, (base) + 3}, \
	    {"tls-key", required_argument, NULL, (base) + 4},                                                      \
	{                                                                                                          \
		"tls-no-cn-verify", no_argument, NULL, (base) + 5                                                  \
	}
#define LR_TLS_NR_OPTS 6
/* Apply option id - base (0..LR_TLS_NR_OPTS-1) with its argument. */
void lr_tls_opt(struct lr_tls_opts *o, int which, const char *arg);

struct lr_tls_creds;
/* Load the CA, CRL (if present, required if named), certificate and key. NULL with err. */
struct lr_tls_creds *lr_tls_creds_load(const struct lr_tls_opts *o, char *err, size_t errlen);
void lr_tls_creds_free(struct lr_tls_creds *c);

struct lr_io {
	int sk;
	void *tls; /* gnutls_session_t, or NULL for plain TCP */
};

/*
 * TLS handshake on io->sk (a blocking socket), as server or client, within
 * timeout_ms; then the peer's certificate is verified against the CA (and
 * against verify_host unless it is NULL).  0, or -1 with err (the session
 * is gone, io->sk stays open).
 */
int lr_io_tls_start(struct lr_io *io, struct lr_tls_creds *creds, bool server, const char *verify_host,
		    unsigned timeout_ms, char *err, size_t errlen);

/* >0 bytes, 0 on EOF, -1 with errno (EAGAIN on a non-blocking socket, EIO for TLS errors; err says). */
ssize_t lr_io_recv(struct lr_io *io, void *buf, size_t len, char *err, size_t errlen);
ssize_t lr_io_send(struct lr_io *io, const void *buf, size_t len, char *err, size_t errlen);
/* Decrypted bytes already buffered (poll() will not report them). */
bool lr_io_pending(struct lr_io *io);
/* TLS: batch the following sends into as few records as possible until uncork. */
void lr_io_cork(struct lr_io *io);
int lr_io_uncork(struct lr_io *io, char *err, size_t errlen);
/* End the TLS session (a close_notify when bye) and close the socket. */
void lr_io_close(struct lr_io *io, bool bye);

/* Whether sk's peer is this host: a loopback address, or our own end's. */
bool lr_io_peer_is_local(int sk);
/*
 * The TCP congestion control of sk: name; or, with name NULL, cubic (else
 * reno) when the peer is on this host, and the system's default otherwise.
 * Between two ends on one host there is no path to probe or share, and a
 * pacing algorithm's (BBR's) timers and round-trip estimates, made of
 * scheduling delays there, only slow the stream (bench/net/README.md has
 * the measurement).  -1 with err if refused.
 */
int lr_io_congestion(int sk, const char *name, char *err, size_t errlen);

#endif

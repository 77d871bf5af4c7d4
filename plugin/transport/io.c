// SPDX-License-Identifier: MIT
/* Plain and TLS byte streams for page-server connections (see io.h). */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "plugin/transport/io.h"

/* CRIU's defaults (criu/tls.c, SYSCONFDIR=/etc) */
#define PKI_CACERT "/etc/pki/CA/cacert.pem"
#define PKI_CACRL  "/etc/pki/CA/cacrl.pem"
#define PKI_CERT   "/etc/pki/criu/cert.pem"
#define PKI_KEY	   "/etc/pki/criu/private/key.pem"

struct lr_tls_creds {
	gnutls_certificate_credentials_t x509;
};

void lr_tls_opt(struct lr_tls_opts *o, int which, const char *arg)
{
	switch (which) {
	case 0:
		o->on = true;
		break;
	case 1:
		o->cacert = arg;
		break;
	case 2:
		o->cacrl = arg;
		break;
	case 3:
		o->cert = arg;
		break;
	case 4:
		o->key = arg;
		break;
	case 5:
		o->no_cn_verify = true;
		break;
	}
}

struct lr_tls_creds *lr_tls_creds_load(const struct lr_tls_opts *o, char *err, size_t errlen)
{
	const char *cacert = o->cacert ? o->cacert : PKI_CACERT, *cacrl = o->cacrl ? o->cacrl : PKI_CACRL;
	const char *cert = o->cert ? o->cert : PKI_CERT, *key = o->key ? o->key : PKI_KEY;
	struct lr_tls_creds *c = calloc(1, sizeof(*c));
	int r;

	if (!c) {
		snprintf(err, errlen, "tls: out of memory");
		return NULL;
	}
	r = gnutls_certificate_allocate_credentials(&c->x509);
	if (r < 0) {
		snprintf(err, errlen, "tls: credentials: %s", gnutls_strerror(r));
		free(c);
		return NULL;
	}
	/* as criu: the system's CAs unless one is named; a named CA file must hold one */
	if (!o->cacert && (r = gnutls_certificate_set_x509_system_trust(c->x509)) < 0) {
		snprintf(err, errlen, "tls: the system's trusted CAs: %s", gnutls_strerror(r));
		goto fail;
	}
	r = gnutls_certificate_set_x509_trust_file(c->x509, cacert, GNUTLS_X509_FMT_PEM);
	if (o->cacert && r <= 0) {
		snprintf(err, errlen, "tls: --tls-cacert %s: %s", cacert,
			 r < 0 ? gnutls_strerror(r) : "no certificate");
		goto fail;
	}
	if (access(cacrl, R_OK) == 0) {
		r = gnutls_certificate_set_x509_crl_file(c->x509, cacrl, GNUTLS_X509_FMT_PEM);
		if (r < 0) {
			snprintf(err, errlen, "tls: revocation list %s: %s", cacrl, gnutls_strerror(r));
			goto fail;
		}
	} else if (o->cacrl) {
		snprintf(err, errlen, "tls: --tls-cacrl %s: %s", cacrl, strerror(errno));
		goto fail;
	}
	r = gnutls_certificate_set_x509_key_file(c->x509, cert, key, GNUTLS_X509_FMT_PEM);
	if (r < 0) {
		snprintf(err, errlen, "tls: certificate %s / key %s: %s", cert, key, gnutls_strerror(r));
		goto fail;
	}
	return c;
fail:
	lr_tls_creds_free(c);
	return NULL;
}

void lr_tls_creds_free(struct lr_tls_creds *c)
{
	if (!c)
		return;
	gnutls_certificate_free_credentials(c->x509);
	free(c);
}

static int verify_peer(gnutls_session_t s, const char *host, char *err, size_t errlen)
{
	unsigned status = 0;
	gnutls_datum_t out = {NULL, 0};
	int r = gnutls_certificate_verify_peers3(s, host, &status);

	if (r < 0) {
		snprintf(err, errlen, "tls: cannot verify the peer: %s", gnutls_strerror(r));
		return -1;
	}
	if (status == 0)
		return 0;
	if (gnutls_certificate_verification_status_print(status, gnutls_certificate_type_get(s), &out, 0) == 0)
		snprintf(err, errlen, "tls: the peer's certificate is not valid: %s", out.data);
	else
		snprintf(err, errlen, "tls: the peer's certificate is not valid (status %#x)", status);
	gnutls_free(out.data);
	return -1;
}

/*
 * gnutls' own writes are send(…, 0): a peer that closed first (a server
 * refusing our certificate) would kill the process with SIGPIPE, as the
 * plain path's MSG_NOSIGNAL prevents there.
 */
static ssize_t tls_push(gnutls_transport_ptr_t sk, const void *buf, size_t len)
{
	return send((int)(intptr_t)sk, buf, len, MSG_NOSIGNAL);
}

int lr_io_tls_start(struct lr_io *io, struct lr_tls_creds *creds, bool server, const char *verify_host,
		    unsigned timeout_ms, char *err, size_t errlen)
{
	gnutls_session_t s;
	int r;

	r = gnutls_init(&s, server ? GNUTLS_SERVER : GNUTLS_CLIENT);
	if (r < 0) {
		snprintf(err, errlen, "tls: session: %s", gnutls_strerror(r));
		return -1;
	}
	if ((r = gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, creds->x509)) < 0 ||
	    (r = gnutls_set_default_priority(s)) < 0)
		goto fail_r;
	if (server) {
		/* as criu: a client without a certificate the CA signed gets nothing */
		gnutls_certificate_server_set_request(s, GNUTLS_CERT_REQUIRE);
		gnutls_certificate_send_x509_rdn_sequence(s, 1);
	}
	gnutls_transport_set_int(s, io->sk);
	gnutls_transport_set_push_function(s, tls_push);
	gnutls_handshake_set_timeout(s, timeout_ms);
	do
		r = gnutls_handshake(s);
	while (r < 0 && !gnutls_error_is_fatal(r));
	if (r < 0)
		goto fail_r;
	if (verify_peer(s, verify_host, err, errlen))
		goto fail;
	io->tls = s;
	return 0;
fail_r:
	snprintf(err, errlen, "tls: handshake: %s", gnutls_strerror(r));
fail:
	gnutls_deinit(s);
	return -1;
}

static ssize_t tls_result(ssize_t r, const char *what, char *err, size_t errlen)
{
	if (r >= 0)
		return r;
	if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED) {
		errno = EAGAIN;
		return -1;
	}
	if (r == GNUTLS_E_PREMATURE_TERMINATION)
		return 0; /* the peer hung up without close_notify: an EOF like TCP's */
	snprintf(err, errlen, "tls: %s: %s", what, gnutls_strerror((int)r));
	errno = EIO;
	return -1;
}

ssize_t lr_io_recv(struct lr_io *io, void *buf, size_t len, char *err, size_t errlen)
{
	ssize_t r;

	if (!io->tls) {
		do
			r = recv(io->sk, buf, len, 0);
		while (r < 0 && errno == EINTR);
		if (r < 0 && errno != EAGAIN)
			snprintf(err, errlen, "recv: %s", strerror(errno));
		return r;
	}
	return tls_result(gnutls_record_recv(io->tls, buf, len), "receive", err, errlen);
}

ssize_t lr_io_send(struct lr_io *io, const void *buf, size_t len, char *err, size_t errlen)
{
	ssize_t r;

	if (!io->tls) {
		do
			r = send(io->sk, buf, len, MSG_NOSIGNAL);
		while (r < 0 && errno == EINTR);
		if (r < 0 && errno != EAGAIN)
			snprintf(err, errlen, "send: %s", strerror(errno));
		return r;
	}
	return tls_result(gnutls_record_send(io->tls, buf, len), "send", err, errlen);
}

bool lr_io_pending(struct lr_io *io)
{
	return io->tls && gnutls_record_check_pending(io->tls) > 0;
}

void lr_io_cork(struct lr_io *io)
{
	if (io->tls)
		gnutls_record_cork(io->tls);
}

int lr_io_uncork(struct lr_io *io, char *err, size_t errlen)
{
	int r;

	if (!io->tls)
		return 0;
	do
		r = gnutls_record_uncork(io->tls, GNUTLS_RECORD_WAIT);
	while (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED);
	if (r < 0) {
		snprintf(err, errlen, "tls: send: %s", gnutls_strerror(r));
		return -1;
	}
	return 0;
}

/*
 * After our close_notify: read until the peer's close_notify and EOF (1 s at
 * most).  Closed with them unread, the socket would send a reset, which a
 * criu peer (tls_terminate_session() with GNUTLS_SHUT_RDWR, then read()
 * expecting EOF, in criu/page-xfer.c) takes for a failed session.
 */
static void drain_peer(int sk)
{
	char buf[512];

	shutdown(sk, SHUT_WR);
	for (int i = 0; i < 64; i++) {
		struct pollfd p = {.fd = sk, .events = POLLIN};
		ssize_t n;

		if (poll(&p, 1, 1000) <= 0)
			return;
		n = recv(sk, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return;
	}
}

void lr_io_close(struct lr_io *io, bool bye)
{
	if (io->tls) {
		if (bye) {
			int r, tries = 0;

			/* the socket may be non-blocking: a full send buffer is waited for a little */
			while ((r = gnutls_bye(io->tls, GNUTLS_SHUT_WR)) == GNUTLS_E_AGAIN ||
			       r == GNUTLS_E_INTERRUPTED) {
				if (++tries > 20)
					break;
				poll(&(struct pollfd){.fd = io->sk, .events = POLLOUT}, 1, 50);
			}
			drain_peer(io->sk);
		}
		gnutls_deinit(io->tls);
		io->tls = NULL;
	}
	if (io->sk >= 0)
		close(io->sk);
	io->sk = -1;
}

/* Whether sk's peer is this host: a loopback address, or our own end's. */
bool lr_io_peer_is_local(int sk)
{
	struct sockaddr_storage me, peer;
	socklen_t ml = sizeof(me), pl = sizeof(peer);

	if (getsockname(sk, (struct sockaddr *)&me, &ml) || getpeername(sk, (struct sockaddr *)&peer, &pl) ||
	    me.ss_family != peer.ss_family)
		return false;
	if (peer.ss_family == AF_INET) {
		struct in_addr a = ((struct sockaddr_in *)&peer)->sin_addr, b = ((struct sockaddr_in *)&me)->sin_addr;

		return (ntohl(a.s_addr) >> 24) == 127 || a.s_addr == b.s_addr;
	}
	if (peer.ss_family == AF_INET6) {
		struct in6_addr *a = &((struct sockaddr_in6 *)&peer)->sin6_addr,
				*b = &((struct sockaddr_in6 *)&me)->sin6_addr;

		return IN6_IS_ADDR_LOOPBACK(a) || !memcmp(a, b, sizeof(*a)) ||
		       (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return false;
}

int lr_io_congestion(int sk, const char *name, char *err, size_t errlen)
{
	static const char *const local[] = {"cubic", "reno"};
	char was[16] = "";
	socklen_t wl = sizeof(was);

	getsockopt(sk, IPPROTO_TCP, TCP_CONGESTION, was, &wl);
	if (name) {
		if (!setsockopt(sk, IPPROTO_TCP, TCP_CONGESTION, name, strlen(name)))
			return 0;
		snprintf(err, errlen, "TCP congestion control %s: %s (the socket keeps %s)", name, strerror(errno),
			 was[0] ? was : "the system's");
		return -1;
	}
	if (!lr_io_peer_is_local(sk))
		return 0;
	for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++)
		if (!strcmp(was, local[i]) || !setsockopt(sk, IPPROTO_TCP, TCP_CONGESTION, local[i], strlen(local[i])))
			return 0;
	snprintf(err, errlen, "TCP congestion control cubic or reno for a peer on this host: %s (the socket keeps %s)",
		 strerror(errno), was[0] ? was : "the system's");
	return -1;
}

// SPDX-License-Identifier: MIT
/*
 * uf-demand-remote: the 2013 proposal's demo over the network.  A region is
 * armed with uf_madvise_userfault(); the SIGBUS handler of each first touch
 * asks `lazyrestore page-server` for the chunk around it (CRIU's PS_IOV_GET,
 * the memory of a task in a dump), receives it into a staging buffer and
 * moves it into place with uf_remap_anon_pages().  Then every word is checked
 * against the pattern the dumped program wrote (test/progs/memhog's).
 *
 *   uf-demand-remote --port P --pid PID --vaddr ADDR --size BYTES --seed N
 *                    [--host 127.0.0.1] [--chunk PAGES]
 *
 * ADDR/BYTES/N are a region of the dumped task as memhog's manifest lists it.
 * A wrong or missing answer stops the program with one line saying why: it
 * never runs on with bytes it did not receive.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lib/userfault/userfault.h"
#include "plugin/pageserver/protocol.h"
#include "test/progs/pattern.h"

#define PAGE 4096UL

/* What the SIGBUS handler needs; set before the first touch. */
static struct {
	int sk;
	uint8_t *base, *staging;
	uint64_t size, vaddr, pid, seed;
	size_t chunk; /* bytes, a power-of-two number of pages */
	unsigned long faults, requests;
} g;

/* Async-signal-safe: write one line and exit. */
static void die_in_handler(const char *what, const char *why)
{
	const char *parts[] = {"uf-demand-remote: ", what, ": ", why, "\n"};

	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
		if (write(2, parts[i], strlen(parts[i])) < 0)
			break;
	_exit(1);
}

static int io_full(int write_side, void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = write_side ? send(g.sk, (char *)buf + done, len - done, MSG_NOSIGNAL)
				       : recv(g.sk, (char *)buf + done, len - done, MSG_WAITALL);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		done += r;
	}
	return 0;
}

/* Fetch [off, off+len) of the region from the server into place. */
static void fetch(uint64_t off, uint64_t len)
{
	while (len) {
		struct ps_iov req = {PS_IOV_GET, (uint32_t)(len / PAGE), g.vaddr + off, g.pid}, ans;
		uint64_t got;

		g.requests++;
		if (io_full(1, &req, sizeof(req)) || io_full(0, &ans, sizeof(ans)))
			die_in_handler("page server", "request failed: I/O error or connection closed");
		if (ans.cmd != (PS_IOV_ADD_F | (PS_PE_PRESENT << PS_FLAGS_SHIFT)) || ans.vaddr != req.vaddr ||
		    ans.nr_pages == 0 || ans.nr_pages > req.nr_pages)
			die_in_handler("page server", "answer does not match the request");
		got = (uint64_t)ans.nr_pages * PAGE;
		if (io_full(0, g.staging, got))
			die_in_handler("page server", "connection lost inside an answer");
		if (uf_remap_anon_pages(g.base + off, g.staging, got))
			die_in_handler("remap failed", uf_last_error());
		off += got;
		len -= got;
	}
}

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	uintptr_t a = (uintptr_t)si->si_addr;
	uint64_t off, len;

	if (si->si_code != BUS_ADRERR || a < (uintptr_t)g.base || a >= (uintptr_t)g.base + g.size)
		die_in_handler("SIGBUS", "outside the demand-paged region");
	off = (a - (uintptr_t)g.base) & ~(uint64_t)(g.chunk - 1);
	len = g.size - off < g.chunk ? g.size - off : g.chunk;
	g.faults++;
	fetch(off, len);
}

static int connect_to(const char *host, const char *port)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res, *ai;
	int sk = -1, one = 1, rc = getaddrinfo(host, port, &hints, &res);

	if (rc) {
		fprintf(stderr, "uf-demand-remote: %s:%s: %s\n", host, port, gai_strerror(rc));
		return -1;
	}
	for (ai = res; ai && sk < 0; ai = ai->ai_next) {
		sk = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
		if (sk >= 0 && connect(sk, ai->ai_addr, ai->ai_addrlen)) {
			close(sk);
			sk = -1;
		}
	}
	freeaddrinfo(res);
	if (sk < 0)
		fprintf(stderr, "uf-demand-remote: cannot connect to %s:%s: %s\n", host, port, strerror(errno));
	else
		setsockopt(sk, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return sk;
}

static int parse_u64(const char *name, const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 0);
	if (errno || end == s || *end) {
		fprintf(stderr, "uf-demand-remote: %s: bad number '%s'\n", name, s);
		return -1;
	}
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: uf-demand-remote --port P --pid PID --vaddr ADDR --size BYTES --seed N\n"
			"                        [--host HOST] [--chunk PAGES]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"host", required_argument, NULL, 'H'},  {"port", required_argument, NULL, 'p'},
	    {"pid", required_argument, NULL, 'P'},   {"vaddr", required_argument, NULL, 'a'},
	    {"size", required_argument, NULL, 's'},  {"seed", required_argument, NULL, 'S'},
	    {"chunk", required_argument, NULL, 'c'}, {NULL, 0, NULL, 0},
	};
	struct sigaction sa = {.sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO};
	const char *host = "127.0.0.1", *port = NULL;
	uint64_t chunk_pages = 16, v;
	struct timespec t0, t1;
	struct ps_iov close_req = {PS_IOV_CLOSE, 0, 0, 0};
	int32_t status;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		uint64_t *dst = c == 'P'   ? &g.pid
				: c == 'a' ? &g.vaddr
				: c == 's' ? &g.size
				: c == 'S' ? &g.seed
				: c == 'c' ? &chunk_pages
					   : NULL;

		if (c == 'H')
			host = optarg;
		else if (c == 'p')
			port = optarg;
		else if (!dst || parse_u64(argv[optind - 1], optarg, dst))
			usage();
	}
	if (!port || !g.pid || !g.size || g.size % PAGE || g.vaddr % PAGE || !chunk_pages || chunk_pages > 1024 ||
	    (chunk_pages & (chunk_pages - 1)))
		usage();
	g.chunk = chunk_pages * PAGE;
	g.sk = connect_to(host, port);
	if (g.sk < 0)
		return 1;
	g.base = mmap(NULL, g.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	g.staging = mmap(NULL, g.chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (g.base == MAP_FAILED || g.staging == MAP_FAILED) {
		perror("uf-demand-remote: mmap");
		return 1;
	}
	if (uf_madvise_userfault(g.base, g.size) || sigaction(SIGBUS, &sa, NULL)) {
		fprintf(stderr, "uf-demand-remote: arming the region: %s\n", uf_last_error());
		return 1;
	}

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (uint64_t off = 0; off < g.size; off += 8) {
		uint64_t want = pattern_word(g.vaddr + off, g.seed);

		v = *(volatile uint64_t *)(g.base + off);
		if (v != want) {
			fprintf(stderr, "uf-demand-remote: word %#llx (task %llu's %#llx) is %#llx, want %#llx\n",
				(unsigned long long)off, (unsigned long long)g.pid, (unsigned long long)(g.vaddr + off),
				(unsigned long long)v, (unsigned long long)want);
			return 1;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (io_full(1, &close_req, sizeof(close_req)) || io_full(0, &status, sizeof(status)) || status) {
		fprintf(stderr, "uf-demand-remote: PS_IOV_CLOSE not acknowledged\n");
		return 1;
	}
	close(g.sk);
	double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("verified %llu bytes of task %llu from %s:%s: %lu faults, %lu requests, %.3f s, %.0f MiB/s\n",
	       (unsigned long long)g.size, (unsigned long long)g.pid, host, port, g.faults, g.requests, s,
	       g.size / s / (1 << 20));
	return 0;
}

// SPDX-License-Identifier: MIT
/*
 * linkprobe: what a link really gives, for bench/net's check of its emulator.
 *
 *   linkprobe -s ADDR PORT                 serve (one thread per connection)
 *   linkprobe ADDR PORT ping N             N one-byte TCP round trips: p50 p99 in us
 *   linkprobe ADDR PORT stream SECS        a TCP stream for SECS: Mbit/s
 *   linkprobe ADDR PORT loaded N SECS      both at once: ping p50 p99 during the stream, Mbit/s
 *
 * A connection's first byte says what it is: 'p' echoes every byte back, 's'
 * reads to EOF and answers the byte count (8 bytes), so the stream's time
 * ends when the last byte has arrived.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BUF (1 << 20)

static struct sockaddr_in addr;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "linkprobe: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int full(int fd, void *buf, size_t n, int wr)
{
	size_t done = 0;
	ssize_t r;

	while (done < n) {
		r = wr ? write(fd, (char *)buf + done, n - done) : read(fd, (char *)buf + done, n - done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		done += r;
	}
	return 0;
}

static void *serve(void *arg)
{
	int fd = (int)(intptr_t)arg, one = 1;
	char kind, *buf = malloc(BUF);
	uint64_t total = 0;
	ssize_t n;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (buf && read(fd, &kind, 1) == 1) {
		if (kind == 'p') {
			while (read(fd, buf, 1) == 1 && write(fd, buf, 1) == 1)
				;
		} else {
			while ((n = read(fd, buf, BUF)) > 0)
				total += n;
			if (full(fd, &total, sizeof(total), 1))
				fprintf(stderr, "linkprobe: stream answer: %s\n", strerror(errno));
		}
	}
	free(buf);
	close(fd);
	return NULL;
}

static int dial(char kind)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)))
		die("connect");
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (full(fd, &kind, 1, 1))
		die("write");
	return fd;
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void ping(int n)
{
	uint64_t *lat = calloc(n, sizeof(*lat)), t;
	int fd = dial('p'), i;
	char c = 'x';

	if (!lat)
		die("calloc");
	for (i = 0; i < n; i++) {
		t = now_ns();
		if (full(fd, &c, 1, 1) || full(fd, &c, 1, 0))
			die("ping");
		lat[i] = now_ns() - t;
		usleep(1000);
	}
	close(fd);
	qsort(lat, n, sizeof(*lat), cmp);
	printf("rtt_p50_us %.1f rtt_p99_us %.1f\n", lat[n / 2] / 1e3, lat[n * 99 / 100] / 1e3);
	free(lat);
}

static double secs;

static void *stream(void *arg)
{
	char *buf = calloc(1, BUF);
	uint64_t t0 = now_ns(), sent = 0, got = 0;
	int fd = dial('s');

	(void)arg;
	if (!buf)
		die("calloc");
	while (now_ns() - t0 < (uint64_t)(secs * 1e9)) {
		if (full(fd, buf, BUF, 1))
			die("stream");
		sent += BUF;
	}
	shutdown(fd, SHUT_WR);
	if (full(fd, &got, sizeof(got), 0) || got != sent)
		die("stream answer");
	printf("stream_mbit_s %.0f\n", sent * 8 / ((now_ns() - t0) / 1e9) / 1e6);
	close(fd);
	free(buf);
	return NULL;
}

int main(int argc, char **argv)
{
	int srv = argc > 1 && !strcmp(argv[1], "-s"), fd, one = 1;
	pthread_t t;

	if (argc < 3 + srv) {
		fprintf(stderr, "usage: linkprobe -s ADDR PORT | ADDR PORT ping N | stream SECS | loaded N SECS\n");
		return 2;
	}
	addr.sin_family = AF_INET;
	addr.sin_port = htons(atoi(argv[2 + srv]));
	if (inet_pton(AF_INET, argv[1 + srv], &addr.sin_addr) != 1) {
		fprintf(stderr, "linkprobe: bad address %s\n", argv[1 + srv]);
		return 2;
	}
	if (srv) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof(addr)) || listen(fd, 8))
			die("listen");
		for (;;) {
			int c = accept(fd, NULL, NULL);

			if (c < 0)
				die("accept");
			if (pthread_create(&t, NULL, serve, (void *)(intptr_t)c))
				die("pthread_create");
			pthread_detach(t);
		}
	}
	if (argc >= 5 && !strcmp(argv[3], "ping")) {
		ping(atoi(argv[4]) > 0 ? atoi(argv[4]) : 1);
	} else if (argc >= 5 && !strcmp(argv[3], "stream")) {
		secs = atof(argv[4]);
		stream(NULL);
	} else if (argc >= 6 && !strcmp(argv[3], "loaded")) {
		secs = atof(argv[5]);
		if (pthread_create(&t, NULL, stream, NULL))
			die("pthread_create");
		usleep(secs * 2e5); /* the stream's queue builds first */
		ping(atoi(argv[4]) > 0 ? atoi(argv[4]) : 1);
		pthread_join(t, NULL);
	} else {
		fprintf(stderr, "linkprobe: unknown mode\n");
		return 2;
	}
	return 0;
}

// daemon_floor: the least a durable agent-state daemon can cost on this
// machine, for bench/agent/daemon_floor.py. One thread, epoll, no framing
// but a 4-byte little-endian length before each request's payload. Every
// request read in one pass of the event loop is written with one pwrite
// into preallocated, already synced zeros and made durable with one
// fdatasync (group commit), then each gets an 8-byte answer (the offset
// reached). No parsing, no index, no per-session file: what is left is the
// system calls and thread wake-ups any client-daemon design pays.
//
//	daemon_floor SOCKET DATAFILE
//
// It prints "ready" once listening and runs until killed.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

enum {
	MAX_CONNS = 256,
	MAX_REQUEST = 1 << 20,
	DATA_BYTES = 64 << 20,
	LISTENER = -1,
};

struct conn {
	int fd;
	uint8_t *buf;  // bytes read and not yet taken, at most 4 + MAX_REQUEST
	size_t have;
	int owed;      // answers due after this pass's fdatasync
};

static struct conn conns[MAX_CONNS];
static uint8_t *batch;
static size_t batched;

static void die(const char *what) {
	perror(what);
	exit(1);
}

static void drop(int ep, struct conn *c) {
	epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	free(c->buf);
	memset(c, 0, sizeof *c);
	c->fd = -1;
}

// take moves every whole request in c's buffer to the batch.
static void take(struct conn *c) {
	size_t off = 0;
	while (c->have - off >= 4) {
		uint32_t n;
		memcpy(&n, c->buf + off, 4);
		if (c->have - off - 4 < n)
			break;
		memcpy(batch + batched, c->buf + off + 4, n);
		batched += n;
		c->owed++;
		off += 4 + n;
	}
	memmove(c->buf, c->buf + off, c->have - off);
	c->have -= off;
}

// readable reads what c's socket holds; it returns 0 when c is closed.
static int readable(struct conn *c) {
	for (;;) {
		ssize_t r = read(c->fd, c->buf + c->have, 4 + MAX_REQUEST - c->have);
		if (r > 0) {
			c->have += (size_t)r;
			take(c);
			if (c->have >= 4) {
				uint32_t n;
				memcpy(&n, c->buf, 4);
				if (n > MAX_REQUEST)
					return 0;
			}
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		return r < 0 && errno == EAGAIN;
	}
}

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: daemon_floor SOCKET DATAFILE\n");
		return 2;
	}
	for (int i = 0; i < MAX_CONNS; i++)
		conns[i].fd = -1;
	batch = malloc((size_t)MAX_CONNS * MAX_REQUEST);
	if (!batch)
		die("malloc");

	int df = open(argv[2], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (df < 0)
		die("open data file");
	static uint8_t zeros[1 << 20];
	for (int i = 0; i < DATA_BYTES / (int)sizeof zeros; i++)
		if (write(df, zeros, sizeof zeros) != (ssize_t)sizeof zeros)
			die("write zeros");
	if (fsync(df))
		die("fsync");
	off_t at = 0;

	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (strlen(argv[1]) >= sizeof a.sun_path) {
		fprintf(stderr, "socket path too long\n");
		return 2;
	}
	strcpy(a.sun_path, argv[1]);
	unlink(argv[1]);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, 128))
		die("listen");
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)LISTENER};
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev))
		die("epoll");
	printf("ready\n");
	fflush(stdout);

	struct epoll_event evs[MAX_CONNS];
	for (;;) {
		int n = epoll_wait(ep, evs, MAX_CONNS, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("epoll_wait");
		for (int i = 0; i < n; i++) {
			if (evs[i].data.u32 == (uint32_t)LISTENER) {
				int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
				int k = 0;
				while (k < MAX_CONNS && conns[k].fd >= 0)
					k++;
				if (fd < 0 || k == MAX_CONNS) {
					if (fd >= 0)
						close(fd);
					continue;
				}
				conns[k] = (struct conn){.fd = fd, .buf = malloc(4 + MAX_REQUEST)};
				struct epoll_event e = {.events = EPOLLIN, .data.u32 = (uint32_t)k};
				if (!conns[k].buf || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e))
					die("accept");
				continue;
			}
			struct conn *c = &conns[evs[i].data.u32];
			if (!readable(c))
				drop(ep, c);
		}
		if (batched == 0)
			continue;
		if (batched > DATA_BYTES) {
			fprintf(stderr, "one pass read more than the data file holds\n");
			return 1;
		}
		if (at + (off_t)batched > DATA_BYTES)
			at = 0;
		if (pwrite(df, batch, batched, at) != (ssize_t)batched)
			die("pwrite");
		if (fdatasync(df))
			die("fdatasync");
		at += (off_t)batched;
		batched = 0;
		uint64_t answer = (uint64_t)at;
		for (int k = 0; k < MAX_CONNS; k++) {
			for (; conns[k].fd >= 0 && conns[k].owed > 0; conns[k].owed--) {
				if (write(conns[k].fd, &answer, sizeof answer) != (ssize_t)sizeof answer) {
					drop(ep, &conns[k]);
					break;
				}
			}
		}
	}
}

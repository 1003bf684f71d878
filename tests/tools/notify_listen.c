/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A stand-in for systemd's notify socket in integration tests:
 *	notify_listen SOCKET OUTFILE
 * binds a datagram socket at SOCKET (a path, or "@name" for an abstract
 * one), creates OUTFILE once listening (so a test can wait for it), and
 * appends every message received as one line, newlines inside a message
 * turned into spaces ("RELOADING=1 MONOTONIC_USEC=..."). Runs until
 * SIGTERM/SIGINT, then removes a path socket.
 */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

/* Ask the receive loop to end. */
static void
on_signal(int signo)
{
	(void)signo;
	stop = 1;
}

/* Bind the datagram socket named by name; exits on failure. */
static int
bind_notify(const char *name)
{
	struct sockaddr_un sa;
	size_t n = strlen(name);
	int fd;

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	if (n == 0 || n >= sizeof(sa.sun_path)) {
		fprintf(stderr, "notify_listen: bad socket name\n");
		exit(2);
	}
	memcpy(sa.sun_path, name, n);
	if (name[0] == '@')
		sa.sun_path[0] = '\0';
	else
		unlink(name);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa,
	    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n +
	    (name[0] == '@' ? 0 : 1))) < 0) {
		fprintf(stderr, "notify_listen: %s: %s\n", name,
		    strerror(errno));
		exit(1);
	}
	return fd;
}

int
main(int argc, char **argv)
{
	struct sigaction sa;
	char buf[4097];
	FILE *out;
	ssize_t n;
	int fd;

	if (argc != 3) {
		fprintf(stderr, "usage: notify_listen SOCKET OUTFILE\n");
		return 2;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;	/* no SA_RESTART: recv returns EINTR */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	fd = bind_notify(argv[1]);
	if ((out = fopen(argv[2], "ae")) == NULL) {
		fprintf(stderr, "notify_listen: %s: %s\n", argv[2],
		    strerror(errno));
		return 1;
	}
	setvbuf(out, NULL, _IOLBF, 0);
	while (!stop) {
		n = recv(fd, buf, sizeof(buf) - 1, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] == '\n' || buf[i] == '\0')
				buf[i] = ' ';
		buf[n] = '\0';
		fprintf(out, "%s\n", buf);
	}
	fclose(out);
	if (argv[1][0] != '@')
		unlink(argv[1]);
	return 0;
}

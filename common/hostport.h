/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one HOST:PORT grammar of every listener (--listen, --metrics-listen):
 *
 *	PORT | :PORT | HOST:PORT | [IPV6]:PORT
 *
 * PORT is decimal, 1..65535 (0, "any free port", only where the caller
 * allows it). HOST is a name or an IPv4 address; an IPv6 address must be
 * in brackets. Without a HOST the caller's default applies.
 */
#ifndef KPGPUD_HOSTPORT_H
#define KPGPUD_HOSTPORT_H

#include <stddef.h>
#include <stdint.h>

#define HOSTPORT_HOST_MAX	255	/* bytes of HOST, as in a DNS name */

/* hostport_parse() flags */
#define HOSTPORT_PORT0		0x1	/* allow port 0: any free port */

struct hostport {
	char		host[HOSTPORT_HOST_MAX + 1];	/* "" = default was "" */
	uint16_t	port;
};

/*
 * Parse spec into ret; default_host (may be "") when spec has no HOST.
 * 0, or -EINVAL / -ERANGE with a one-line reason in err (no spec in it:
 * the caller names the option); ret untouched on failure.
 */
int	 hostport_parse(const char *spec, const char *default_host,
	    int flags, struct hostport *ret, char *err, size_t errlen);

#endif

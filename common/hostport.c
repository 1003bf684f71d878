/* SPDX-License-Identifier: Apache-2.0 */
/* The HOST:PORT grammar shared by every listener (see hostport.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/hostport.h"

/* Parse the decimal PORT part; 0 or -EINVAL/-ERANGE with err set. */
static int
hostport_port(const char *s, int flags, uint16_t *ret, char *err,
    size_t errlen)
{
	unsigned long v = 0;
	size_t i;

	if (s[0] == '\0') {
		snprintf(err, errlen, "missing port");
		return -EINVAL;
	}
	for (i = 0; s[i] != '\0'; i++) {
		if (s[i] < '0' || s[i] > '9') {
			snprintf(err, errlen, "port is not a decimal number");
			return -EINVAL;
		}
		if (i >= 5) {
			snprintf(err, errlen, "port out of range 1..65535");
			return -ERANGE;
		}
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v > 65535 || (v == 0 && !(flags & HOSTPORT_PORT0))) {
		snprintf(err, errlen, "port out of range %s..65535",
		    flags & HOSTPORT_PORT0 ? "0" : "1");
		return -ERANGE;
	}
	*ret = (uint16_t)v;
	return 0;
}

/* Check a HOST of len bytes: not empty, not too long, no space or ':'. */
static int
hostport_host(const char *h, size_t len, int v6, char *err, size_t errlen)
{
	size_t i;

	if (len == 0) {
		snprintf(err, errlen, "empty host");
		return -EINVAL;
	}
	if (len > HOSTPORT_HOST_MAX) {
		snprintf(err, errlen, "host longer than %d bytes",
		    HOSTPORT_HOST_MAX);
		return -EINVAL;
	}
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)h[i];

		if (c <= ' ' || c >= 0x7f || c == '[' || c == ']' ||
		    c == '/') {
			snprintf(err, errlen, "bad character in host");
			return -EINVAL;
		}
		if (c == ':' && !v6) {
			snprintf(err, errlen, "an IPv6 address must be in "
			    "brackets: [ADDR]:PORT");
			return -EINVAL;
		}
	}
	return 0;
}

/* Parse PORT, :PORT, HOST:PORT or [IPV6]:PORT. */
int
hostport_parse(const char *spec, const char *default_host, int flags,
    struct hostport *ret, char *err, size_t errlen)
{
	const char *host = default_host, *port = spec, *colon;
	size_t hlen = strlen(default_host);
	uint16_t p;
	int r, v6 = 0;

	if (spec[0] == '[') {
		const char *end = strchr(spec, ']');

		if (end == NULL) {
			snprintf(err, errlen, "missing ']' after IPv6 address");
			return -EINVAL;
		}
		if (end[1] != ':') {
			snprintf(err, errlen, "expected ':PORT' after ']'");
			return -EINVAL;
		}
		host = spec + 1;
		hlen = (size_t)(end - host);
		port = end + 2;
		v6 = 1;
	} else if ((colon = strrchr(spec, ':')) != NULL) {
		port = colon + 1;
		if (colon != spec) {
			host = spec;
			hlen = (size_t)(colon - spec);
		}
	}
	if ((host != default_host || hlen > 0) &&
	    (r = hostport_host(host, hlen, v6, err, errlen)) < 0)
		return r;
	if ((r = hostport_port(port, flags, &p, err, errlen)) < 0)
		return r;
	memcpy(ret->host, host, hlen);
	ret->host[hlen] = '\0';
	ret->port = p;
	return 0;
}

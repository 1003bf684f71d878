/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The webhook's connections (see server_int.h): accept under the total
 * and per-address caps, TLS with read-ahead, HTTP/1.1 requests framed by
 * httphead.c, one at a time per connection, replies written with one
 * SSL_write each. One persistent read event per connection; a write event
 * only while a reply waits for the socket. One timer per connection: the
 * first request's deadline, then after each reply the time the next
 * request has to arrive whole (--idle-timeout), and a short linger after
 * a refusal so the peer reads it before the close. Every input buffer a
 * connection holds is counted against --max-buffered (bufcap.h): a read
 * that would need more is refused with 503 and the buffer released.
 */
#include "kpgpud-admit/server_int.h"

#include <openssl/err.h>

#define CONN_READ	16384	/* room offered to each SSL_read; twice it
				   is SERVER_REQUEST_BUFFER's room */
#define CONN_KEEP	65536	/* larger buffers are not kept as spares */
#define CONN_LINGER_MS	1000	/* a refused peer's last bytes, at most */
#define CONN_LINGER_MAX	(1 << 20)

_Static_assert(SERVER_REQUEST_BUFFER(0) == 2 * CONN_READ,
    "a request's buffer has room for two reads beyond its caps");

enum { CP_MORE, CP_WAIT, CP_CLOSE };

static void	conn_pump(struct conn *c);

/* The bucket of an address. */
static size_t
addr_bucket(const struct in6_addr *a)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < sizeof(a->s6_addr); i++)
		h = (h ^ a->s6_addr[i]) * 16777619u;
	return h % SRV_ADDR_BUCKETS;
}

/*
 * Count one more connection from a; NULL when it is over the cap (or out
 * of memory), else the entry to release with addr_release().
 */
static struct addr_count *
addr_take(struct server *s, const struct in6_addr *a)
{
	struct addr_count **pp, *e;

	pthread_mutex_lock(&s->addr_lock);
	for (pp = &s->addrs[addr_bucket(a)]; (e = *pp) != NULL; pp = &e->next)
		if (memcmp(&e->a, a, sizeof(*a)) == 0)
			break;
	if (e == NULL && (e = calloc(1, sizeof(*e))) != NULL) {
		e->a = *a;
		*pp = e;
	}
	if (e != NULL && e->n >= s->cfg.max_conns_per_addr)
		e = NULL;
	else if (e != NULL)
		e->n++;
	pthread_mutex_unlock(&s->addr_lock);
	return e;
}

/* A connection counted by addr_take() ended. */
static void
addr_release(struct server *s, struct addr_count *e)
{
	struct addr_count **pp;

	pthread_mutex_lock(&s->addr_lock);
	if (--e->n == 0)
		for (pp = &s->addrs[addr_bucket(&e->a)]; *pp != NULL;
		    pp = &(*pp)->next)
			if (*pp == e) {
				*pp = e->next;
				free(e);
				break;
			}
	pthread_mutex_unlock(&s->addr_lock);
}

/* Whether a rate-limited log line may go out now (once a minute). */
static bool
rate_due(uint64_t *last_ms)
{
	uint64_t now = monotonic_ms();

	if (*last_ms != 0 && now - *last_ms < 60000)
		return false;
	*last_ms = now;
	return true;
}

/* The peer's address as an IPv6 address; false when it has none. */
static bool
peer_addr(const struct sockaddr_storage *ss, struct in6_addr *ret, char *text,
    size_t textlen)
{
	if (ss->ss_family == AF_INET6) {
		*ret = ((const struct sockaddr_in6 *)ss)->sin6_addr;
		inet_ntop(AF_INET6, ret, text, (socklen_t)textlen);
		return true;
	}
	if (ss->ss_family != AF_INET)
		return false;
	memset(ret, 0, sizeof(*ret));
	ret->s6_addr[10] = ret->s6_addr[11] = 0xff;
	memcpy(&ret->s6_addr[12], &((const struct sockaddr_in *)ss)->sin_addr,
	    4);
	inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, text,
	    (socklen_t)textlen);
	return true;
}

/*
 * An emptied buffer goes back to the worker's spares (a few per direction)
 * or is freed: an idle connection holds none, and the next request on any
 * of the worker's connections takes a spare instead of a malloc.
 */
static void
buf_release(struct spares *sp, char **p, size_t *cap)
{
	if (sp->n < SRV_SPARES && *cap <= CONN_KEEP) {
		sp->p[sp->n] = *p;
		sp->cap[sp->n++] = *cap;
	} else
		free(*p);
	*p = NULL;
	*cap = 0;
}

/* Take one of the worker's spares when the connection has no buffer. */
static void
buf_take(struct spares *sp, char **p, size_t *cap)
{
	if (*p != NULL || sp->n == 0)
		return;
	*p = sp->p[--sp->n];
	*cap = sp->cap[sp->n];
}

/*
 * Give the connection's input buffer back (to the spares or freed) and
 * its bytes back to --max-buffered.
 */
static void
conn_in_release(struct conn *c)
{
	bufcap_give(&c->w->srv->bufcap, c->in_cap);
	buf_release(&c->w->spare_in, &c->in, &c->in_cap);
}

/* Free a worker's spare buffers (it is finishing). */
void
conn_free_spares(struct worker *w)
{
	while (w->spare_in.n > 0)
		free(w->spare_in.p[--w->spare_in.n]);
	while (w->spare_out.n > 0)
		free(w->spare_out.p[--w->spare_out.n]);
}

/* Forget a connection: its counts, events, TLS, socket and buffers. */
static void
conn_free(struct conn *c)
{
	struct worker *w = c->w;
	struct server *s = w->srv;

	if (c->job != NULL)
		c->job->c = NULL;	/* its answer is dropped */
	if ((*c->prevp = c->next) != NULL)
		c->next->prevp = c->prevp;
	event_free(c->rev);
	event_free(c->wev);
	event_free(c->timer);
	SSL_free(c->ssl);
	ERR_clear_error();
	close(c->fd);
	if (c->addr != NULL)
		addr_release(s, c->addr);
	metric_set(s->cfg.open, NULL, NULL,
	    (double)(atomic_fetch_sub(&s->nconns, 1) - 1));
	conn_in_release(c);
	buf_release(&w->spare_out, &c->out, &c->out_cap);
	if (c->sending) {
		w->sending--;
		if (!w->finished)
			server_maybe_finish(w);
	}
	free(c);
}

/* Close every connection of a finishing worker. */
void
conn_close_all(struct worker *w)
{
	while (w->conns != NULL)
		conn_free(w->conns);
}

/*
 * Close after the last reply: TLS close_notify, and when the peer may
 * still be sending what was refused, read and drop it for a moment so
 * the close does not reset the reply away.
 */
static void
conn_close(struct conn *c)
{
	static const struct timeval linger = { 0, CONN_LINGER_MS * 1000 };

	if (c->dead || !c->handshaken) {
		conn_free(c);
		return;
	}
	(void)SSL_shutdown(c->ssl);
	ERR_clear_error();
	if (!c->drain || shutdown(c->fd, SHUT_WR) < 0) {
		conn_free(c);
		return;
	}
	c->lingering = true;
	if (!c->reading && event_add(c->rev, NULL) == 0)
		c->reading = true;
	event_add(c->timer, &linger);
}

/* Lingering: drop what comes until EOF, the cap or the timer. */
static void
conn_linger(struct conn *c)
{
	char scratch[4096];
	ssize_t n = read(c->fd, scratch, sizeof(scratch));

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0 && (c->lingered += (size_t)n) < CONN_LINGER_MAX)
		return;
	conn_free(c);
}

/* The cached Date header line of this second. */
static const char *
conn_date(struct worker *w, size_t *ret_len)
{
	time_t now = time(NULL);
	struct tm tm;

	if (now != w->date_t || w->date_len == 0) {
		gmtime_r(&now, &tm);
		w->date_len = strftime(w->date, sizeof(w->date),
		    "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
		w->date_t = now;
	}
	*ret_len = w->date_len;
	return w->date;
}

/* Make room for n more bytes of reply. */
static int
conn_out_room(struct conn *c, size_t n)
{
	size_t cap;
	char *p;

	buf_take(&c->w->spare_out, &c->out, &c->out_cap);
	cap = c->out_cap ? c->out_cap : 4096;
	if (c->out_len + n <= c->out_cap)
		return 0;
	while (cap < c->out_len + n)
		cap *= 2;
	if ((p = realloc(c->out, cap)) == NULL)
		return -ENOMEM;
	c->out = p;
	c->out_cap = cap;
	return 0;
}

/* Append n bytes at p; the end. */
static char *
put(char *p, const char *s, size_t n)
{
	memcpy(p, s, n);
	return p + n;
}

/* Append a NUL-terminated string at p; the end. */
static char *
puts_(char *p, const char *s)
{
	return put(p, s, strlen(s));
}

/* Append v in decimal at p; the end. */
static char *
put_num(char *p, size_t v)
{
	char tmp[24];
	size_t i = sizeof(tmp);

	do
		tmp[--i] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	return put(p, tmp + i, sizeof(tmp) - i);
}

/*
 * Write out what waits in out. 0 when all of it is written, 1 when the
 * socket is full (a write event is added and reading stops), -1 when the
 * connection failed (marked dead).
 */
static int
conn_flush(struct conn *c)
{
	int n;

	while (c->out_off < c->out_len) {
		n = SSL_write(c->ssl, c->out + c->out_off,
		    (int)(c->out_len - c->out_off));
		if (n > 0) {
			c->out_off += (size_t)n;
			continue;
		}
		if (SSL_get_error(c->ssl, n) != SSL_ERROR_WANT_WRITE) {
			ERR_clear_error();
			c->dead = true;
			return -1;
		}
		if (!c->sending) {
			c->sending = true;
			c->w->sending++;
		}
		if (c->reading) {
			event_del(c->rev);
			c->reading = false;
		}
		event_add(c->wev, NULL);
		return 1;
	}
	c->out_off = c->out_len = 0;
	buf_release(&c->w->spare_out, &c->out, &c->out_cap);
	if (c->sending) {
		c->sending = false;
		c->w->sending--;
	}
	/* a final reply: the next request has --idle-timeout to come */
	if (c->rearm && !c->closing)
		event_add(c->timer, c->w->idle_tv);
	c->rearm = false;
	return 0;
}

/* Send a reply; see server_int.h. */
void
conn_reply(struct conn *c, int code, const char *reason, const char *ctype,
    const char *extra, const char *body, size_t len)
{
	struct worker *w = c->w;
	const char *date;
	size_t dlen, hlen, blen;
	char *p;

	if (w->stopping || c->h.close)
		c->closing = true;
	date = conn_date(w, &dlen);
	hlen = 128 + strlen(reason) + strlen(ctype) + dlen +
	    (extra != NULL ? strlen(extra) : 0);
	/* a HEAD is told the length and gets no body */
	blen = c->h.method == HTTPHEAD_HEAD ? 0 : len;
	if (conn_out_room(c, hlen + blen) < 0) {
		c->dead = true;
		return;
	}
	p = c->out + c->out_len;
	p = put(p, "HTTP/1.1 ", 9);
	p = put_num(p, (size_t)code);
	*p++ = ' ';
	p = puts_(p, reason);
	p = put(p, "\r\nContent-Type: ", 16);
	p = puts_(p, ctype);
	p = put(p, "\r\nContent-Length: ", 18);
	p = put_num(p, len);
	p = put(p, "\r\n", 2);
	p = put(p, date, dlen);
	if (extra != NULL)
		p = puts_(p, extra);
	if (c->closing)
		p = put(p, "Connection: close\r\n", 19);
	p = put(p, "\r\n", 2);
	if (blen > 0)
		p = put(p, body, blen);
	c->out_len = (size_t)(p - c->out);
	c->rearm = true;
	(void)conn_flush(c);
}

/* The reason phrase of a status the framing refuses with. */
static const char *
reason_of(int status)
{
	switch (status) {
	case 413:
		return "Payload Too Large";
	case 417:
		return "Expectation Failed";
	case 431:
		return "Request Header Fields Too Large";
	case 501:
		return "Not Implemented";
	case 503:
		return "Service Unavailable";
	case 505:
		return "HTTP Version Not Supported";
	default:
		return "Bad Request";
	}
}

/*
 * Refuse the request being read and close after the reply; its bytes are
 * not needed any more, so the input buffer goes at once.
 */
static void
conn_refuse(struct conn *c, int status, const char *msg)
{
	char body[128];
	int n = snprintf(body, sizeof(body), "%s\n", msg);

	request_account(c->w, status == 413 ? "too_large" : status == 503 ?
	    "over_buffer_cap" : "bad_request", monotonic_usec());
	c->h.method = HTTPHEAD_OTHER;	/* a body even for a HEAD */
	c->closing = true;
	c->drain = true;
	conn_in_release(c);
	c->in_len = c->used = c->scan = 0;
	conn_reply(c, status, reason_of(status), "text/plain; charset=utf-8",
	    status == 503 ? "Retry-After: 1\r\n" : NULL, body, (size_t)n);
}

/* The request's bytes are done with: what follows is the next request. */
static void
conn_request_over(struct conn *c)
{
	c->in_len -= c->used;
	if (c->in_len > 0)
		memmove(c->in, c->in + c->used, c->in_len);
	else
		conn_in_release(c);
	c->used = 0;
	c->scan = 0;
	c->have_head = false;
}

/*
 * Grow the input buffer to cap bytes within --max-buffered: 0, -EBUSY
 * when the total leaves no room (nothing changed), or -ENOMEM.
 */
static int
conn_in_grow(struct conn *c, size_t cap)
{
	struct bufcap *b = &c->w->srv->bufcap;
	char *p;

	if (bufcap_take(b, c->in_cap, cap) < 0)
		return -EBUSY;
	if ((p = realloc(c->in, cap)) == NULL) {
		bufcap_give(b, cap - c->in_cap);
		return -ENOMEM;
	}
	c->in = p;
	c->in_cap = cap;
	return 0;
}

/*
 * The request being read would take the bytes buffered across all
 * connections past --max-buffered: refuse it (503, counted) so its
 * buffer goes, and log that once a minute.
 */
static void
conn_refuse_busy(struct conn *c)
{
	struct server *s = c->w->srv;

	if (rate_due(&c->w->bufcap_logged_ms))
		log_warn("request refused: %zu bytes buffered across "
		    "connections, --max-buffered=%zu reached (counted in "
		    "kpgpud_admit_requests_total{result=\"over_buffer_cap\"})",
		    bufcap_used(&s->bufcap), s->cfg.max_buffered);
	conn_refuse(c, 503, "too many request bytes buffered; retry");
}

/*
 * A body of announced length gets its whole room at once (no doubling
 * past it), or a 503 before the peer sends it (Expect: 100-continue) or
 * while it does. False: refused or failed.
 */
static bool
conn_body_room(struct conn *c, size_t end)
{
	size_t body = (size_t)c->h.content_length;
	int r;

	if (c->h.chunked || c->h.content_length <= 0 ||
	    c->in_cap >= end + body + CONN_READ / 4)
		return true;
	if ((r = conn_in_grow(c, end + body + CONN_READ)) == -EBUSY)
		conn_refuse_busy(c);
	else if (r < 0)
		c->dead = true;
	return r == 0;
}

/* The head is in: parse it and check what it announces. False: refused. */
static bool
conn_head(struct conn *c, size_t end)
{
	struct server *s = c->w->srv;
	int st;

	if (httphead_parse(c->in, end, &c->h, &st) < 0) {
		conn_refuse(c, st, st == 431 ? "too many header fields" :
		    "malformed request head");
		return false;
	}
	c->have_head = true;
	c->raw = c->body_len = 0;
	memset(&c->ch, 0, sizeof(c->ch));
	if (c->h.method == HTTPHEAD_OTHER) {
		conn_refuse(c, 501, "method not implemented");
		return false;
	}
	if (c->h.content_length > (int64_t)s->cfg.max_body) {
		conn_refuse(c, 413, "body too large");
		return false;
	}
	if (!conn_body_room(c, end))
		return false;
	/* The peer waits for this before it sends a body. */
	if (c->h.expect_continue && c->in_len == end && (c->h.chunked ||
	    c->h.content_length > 0) && conn_out_room(c, 25) == 0) {
		memcpy(c->out + c->out_len, "HTTP/1.1 100 Continue\r\n\r\n", 25);
		c->out_len += 25;
		(void)conn_flush(c);
	}
	return true;
}

/* Whether the request's body is all in; false: more bytes needed. */
static bool
conn_body(struct conn *c)
{
	struct server *s = c->w->srv;
	size_t hl = c->h.head_len;
	int r;

	if (!c->h.chunked) {
		size_t cl = c->h.content_length > 0 ?
		    (size_t)c->h.content_length : 0;

		if (c->in_len - hl < cl)
			return false;
		c->body_len = cl;
		c->used = hl + cl;
		return true;
	}
	r = httphead_chunked(&c->ch, c->in + hl, c->in_len - hl, &c->raw,
	    &c->body_len, s->cfg.max_body);
	if (r == -EFBIG)
		conn_refuse(c, 413, "body too large");
	else if (r < 0)
		conn_refuse(c, 400, "malformed chunked body");
	if (r != 1)
		return false;
	c->used = hl + c->raw;
	return true;
}

/*
 * Frame and answer every whole request in in[], one at a time: CP_MORE
 * when more bytes are needed, CP_WAIT while a request is deferred or a
 * reply waits for the socket, CP_CLOSE when the connection is to close.
 */
static int
conn_process(struct conn *c)
{
	struct server *s = c->w->srv;
	size_t end;

	while (c->job == NULL && c->out_len == 0 && !c->closing && !c->dead) {
		if (!c->have_head) {
			if (c->in_len == 0)
				return CP_MORE;
			end = httphead_end(c->in, c->in_len, &c->scan);
			if (end == 0 && c->in_len <= s->cfg.max_headers)
				return CP_MORE;
			if (end == 0 || end > s->cfg.max_headers)
				conn_refuse(c, 431, "header too large");
			else if (conn_head(c, end) && c->out_len > 0)
				return CP_WAIT;	/* 100 Continue is waiting */
			continue;
		}
		if (!conn_body(c)) {
			if (c->closing)
				continue;
			return CP_MORE;
		}
		c->served = true;
		request_handle(c, c->in, &c->h, c->in + c->h.head_len,
		    c->body_len);
		if (c->job != NULL) {
			if (c->reading) {
				event_del(c->rev);
				c->reading = false;
			}
			return CP_WAIT;
		}
		conn_request_over(c);
	}
	if (c->dead || (c->closing && c->out_len == 0))
		return CP_CLOSE;
	return CP_WAIT;
}

/*
 * Make room for one more SSL_read, within --max-buffered: 0, -EBUSY when
 * the total leaves none (refuse the request), -ENOSPC when the request's
 * own cap leaves none or -ENOMEM (close).
 */
static int
conn_in_room(struct conn *c)
{
	struct server *s = c->w->srv;
	struct spares *sp = &c->w->spare_in;
	size_t limit = SERVER_REQUEST_BUFFER(s->cfg.max_headers +
	    s->cfg.max_body);
	size_t cap;

	if (c->in == NULL && sp->n > 0) {
		if (bufcap_take(&s->bufcap, 0, sp->cap[sp->n - 1]) < 0)
			return -EBUSY;
		buf_take(sp, &c->in, &c->in_cap);
	}
	if (c->in_cap - c->in_len >= CONN_READ / 4)
		return 0;
	cap = c->in_cap ? c->in_cap : CONN_READ;
	while (cap < c->in_len + CONN_READ && cap < limit)
		cap *= 2;
	if (cap > limit)
		cap = limit;
	if (cap <= c->in_cap)
		return c->in_len < c->in_cap ? 0 : -ENOSPC;
	return conn_in_grow(c, cap);
}

/*
 * What an SSL call that returned n <= 0 waits for: 0 the socket (a write
 * event when OpenSSL needs to write), -1 the connection is over (closed by
 * the peer, or failed: marked dead).
 */
static int
conn_ssl_wait(struct conn *c, int n)
{
	switch (SSL_get_error(c->ssl, n)) {
	case SSL_ERROR_WANT_READ:
		return 0;
	case SSL_ERROR_WANT_WRITE:
		event_add(c->wev, NULL);
		return 0;
	case SSL_ERROR_ZERO_RETURN:
		return -1;
	default:
		ERR_clear_error();
		c->dead = true;
		return -1;
	}
}

/*
 * One SSL_read into in[]: 1 read something, 0 wait for the socket, -1
 * gone, -EBUSY no room under --max-buffered.
 */
static int
conn_read(struct conn *c)
{
	int n = conn_in_room(c);

	if (n == -EBUSY)
		return n;
	if (n < 0)
		return -1;
	n = SSL_read(c->ssl, c->in + c->in_len, (int)(c->in_cap - c->in_len));
	if (n > 0) {
		c->in_len += (size_t)n;
		return 1;
	}
	return conn_ssl_wait(c, n);
}

/* The TLS handshake's next step: 1 done, 0 wait, -1 failed. */
static int
conn_handshake(struct conn *c)
{
	int n = SSL_do_handshake(c->ssl);

	if (n == 1) {
		c->handshaken = true;
		return 1;
	}
	return conn_ssl_wait(c, n);
}

/*
 * Move the connection on: the handshake, then requests already received,
 * then reads while OpenSSL holds more (read-ahead takes what the socket
 * has, the handshake's tail included), and back to the event loop.
 */
static void
conn_pump(struct conn *c)
{
	bool got = false;
	int r;

	if (!c->handshaken && (r = conn_handshake(c)) <= 0) {
		if (r < 0)
			conn_free(c);
		return;
	}
	for (;;) {
		switch (conn_process(c)) {
		case CP_WAIT:
			return;
		case CP_CLOSE:
			conn_close(c);
			return;
		default:
			break;
		}
		if (got && !SSL_has_pending(c->ssl))
			return;
		if ((r = conn_read(c)) == -EBUSY) {
			conn_refuse_busy(c);
			continue;
		}
		if (r < 0) {
			conn_free(c);
			return;
		}
		if (r == 0)
			return;
		got = true;
	}
}

/* A reply went out whole or a deferred one was made: carry on. */
static void
conn_continue(struct conn *c)
{
	if (c->dead) {
		conn_free(c);
		return;
	}
	if (c->out_len > 0 || c->job != NULL)
		return;
	if (c->closing) {
		conn_close(c);
		return;
	}
	if (!c->reading && event_add(c->rev, NULL) == 0)
		c->reading = true;
	conn_pump(c);
}

/* A deferred request was answered; see server_int.h. */
void
conn_resume(struct conn *c)
{
	conn_request_over(c);
	conn_continue(c);
}

/* The socket is readable or writable. */
static void
conn_io_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	(void)fd;
	if (c->lingering) {
		if (what & EV_READ)
			conn_linger(c);
		return;
	}
	if ((what & EV_WRITE) && c->out_len > 0) {
		if (conn_flush(c) != 1)
			conn_continue(c);
		return;
	}
	if (c->out_len == 0)
		conn_pump(c);
}

/*
 * The connection's timer: the first request did not come whole in time
 * (counted), the next one did not within --idle-timeout, or lingering is
 * over. A request still being decided keeps its connection.
 */
static void
conn_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	struct worker *w = c->w;

	(void)fd;
	(void)what;
	if (c->job != NULL && !c->lingering) {
		event_add(c->timer, w->idle_tv);
		return;
	}
	if (!c->served && !c->lingering) {
		metric_inc(w->srv->cfg.deadline_closed, NULL, NULL);
		if (rate_due(&w->deadline_logged_ms))
			log_warn("connection closed: no complete first request "
			    "within --first-request-timeout (counted in "
			    "kpgpud_admit_connections_deadline_total)");
	}
	conn_free(c);
}

/* Whether a new connection may stay under the caps; counts and logs. */
static bool
conn_admit(struct worker *w, const struct sockaddr_storage *ss,
    struct addr_count **ret_addr)
{
	struct server *s = w->srv;
	char text[INET6_ADDRSTRLEN] = "?";
	struct in6_addr a;

	metric_inc(s->cfg.connections, w->idxs, NULL);
	if (atomic_load(&s->nconns) >= s->cfg.max_connections) {
		metric_inc(s->cfg.refused, NULL, NULL);
		if (rate_due(&w->refused_logged_ms))
			log_warn("connection refused: %u open, "
			    "--max-connections reached (counted in "
			    "kpgpud_admit_connections_refused_total)",
			    atomic_load(&s->nconns));
		return false;
	}
	*ret_addr = NULL;
	if (s->cfg.max_conns_per_addr > 0 &&
	    peer_addr(ss, &a, text, sizeof(text)) &&
	    (*ret_addr = addr_take(s, &a)) == NULL) {
		metric_inc(s->cfg.refused_addr, NULL, NULL);
		if (rate_due(&w->addr_logged_ms))
			log_warn("connection refused: address=%s has "
			    "--max-connections-per-address=%u open (counted "
			    "in kpgpud_admit_connections_refused_per_address"
			    "_total)", text, s->cfg.max_conns_per_addr);
		return false;
	}
	return true;
}

/* Set a TLS connection up on an accepted socket, or close it. */
static void
conn_new(struct worker *w, int fd, const struct sockaddr_storage *ss)
{
	struct server *s = w->srv;
	struct addr_count *addr = NULL;
	struct conn *c;

	if (!conn_admit(w, ss, &addr)) {
		close(fd);
		return;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL ||
	    (c->ssl = tls_ssl_new(s->cfg.tls)) == NULL ||
	    SSL_set_fd(c->ssl, fd) != 1 ||
	    (c->rev = event_new(w->base, fd, EV_READ | EV_PERSIST, conn_io_cb,
	    c)) == NULL ||
	    (c->wev = event_new(w->base, fd, EV_WRITE, conn_io_cb, c)) ==
	    NULL || (c->timer = evtimer_new(w->base, conn_timer_cb, c)) ==
	    NULL || event_add(c->rev, NULL) < 0) {
		log_err("cannot set up TLS for a connection; refusing it");
		if (c != NULL) {
			SSL_free(c->ssl);
			if (c->rev != NULL)
				event_free(c->rev);
			if (c->wev != NULL)
				event_free(c->wev);
			free(c);
		}
		ERR_clear_error();
		if (addr != NULL)
			addr_release(s, addr);
		close(fd);
		return;
	}
	SSL_set_accept_state(c->ssl);
	SSL_set_read_ahead(c->ssl, 1);
	c->w = w;
	c->fd = fd;
	c->addr = addr;
	c->reading = true;
	if ((c->next = w->conns) != NULL)
		c->next->prevp = &c->next;
	c->prevp = &w->conns;
	w->conns = c;
	metric_set(s->cfg.open, NULL, NULL,
	    (double)(atomic_fetch_add(&s->nconns, 1) + 1));
	event_add(c->timer, w->first_tv);
}

/* Accepting again after running out of descriptors. */
void
conn_accept_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;

	(void)fd;
	(void)what;
	if (!w->stopping && w->lev != NULL)
		event_add(w->lev, NULL);
}

/* Accept new connections; see server_int.h. */
void
conn_accept_cb(evutil_socket_t lfd, short what, void *arg)
{
	static const struct timeval pause = { 0, 100 * 1000 };
	struct worker *w = arg;
	struct sockaddr_storage ss;
	socklen_t sl;
	int fd;

	(void)what;
	for (int i = 0; i < 64; i++) {
		sl = sizeof(ss);
		fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK |
		    SOCK_CLOEXEC);
		if (fd >= 0) {
			conn_new(w, fd, &ss);
			continue;
		}
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return;
		/* out of descriptors or memory: pause, do not spin */
		if (rate_due(&w->accept_logged_ms))
			log_warn("accept: %s; pausing 100 ms", strerror(errno));
		event_del(w->lev);
		event_add(w->lpause, &pause);
		return;
	}
}

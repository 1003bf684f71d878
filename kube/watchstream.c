/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Streaming decoder for watch responses: a line splitter with a cap and an
 * event decoder. Pure: no I/O, no logging.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/jscan.h"
#include "kube/watchstream.h"

struct watchstream {
	char		*buf;
	size_t		 start;		/* first byte not yet consumed */
	size_t		 scan;		/* bytes before this hold no '\n' */
	size_t		 len;
	size_t		 cap;
	size_t		 max_line;
	int		 err;		/* sticky error */
	unsigned long	 count;
	unsigned long	 lineno;
	char		 errmsg[160];
};

static const char *const watch_type_names[] = {
	[WATCH_ADDED] = "ADDED",
	[WATCH_MODIFIED] = "MODIFIED",
	[WATCH_DELETED] = "DELETED",
	[WATCH_BOOKMARK] = "BOOKMARK",
	[WATCH_ERROR] = "ERROR",
};

/* Name of an event type for logs. */
const char *
watch_type_name(enum watch_type t)
{
	if (t < WATCH_ADDED || t > WATCH_ERROR)
		return "UNKNOWN";
	return watch_type_names[t];
}

/* Allocate a decoder with the given line cap. */
struct watchstream *
watchstream_new(size_t max_line)
{
	struct watchstream *ws;

	if ((ws = calloc(1, sizeof(*ws))) == NULL)
		return NULL;
	ws->max_line = max_line ? max_line : WATCHSTREAM_DEFAULT_MAX_LINE;
	return ws;
}

/* Free a decoder and its buffer. */
void
watchstream_free(struct watchstream *ws)
{
	if (ws == NULL)
		return;
	free(ws->buf);
	free(ws);
}

/* Record a sticky error with its reason and return it. */
static int
ws_fail(struct watchstream *ws, int err, const char *what)
{
	ws->err = err;
	if (err == -EMSGSIZE)
		snprintf(ws->errmsg, sizeof(ws->errmsg),
		    "line %lu longer than %zu bytes", ws->lineno + 1,
		    ws->max_line);
	else
		snprintf(ws->errmsg, sizeof(ws->errmsg), "line %lu: %s",
		    ws->lineno + 1, what);
	return err;
}

/* Append bytes read from the stream. */
int
watchstream_feed(struct watchstream *ws, const void *buf, size_t len)
{
	size_t pending, want, ncap;
	char *nb;

	if (ws->err)
		return ws->err;
	if (len == 0)
		return 0;
	pending = ws->len - ws->start;
	/* [start, scan) never holds a '\n'; exact when all of it is scanned */
	if (ws->scan == ws->len && pending + len > ws->max_line &&
	    memchr(buf, '\n', len) == NULL)
		return ws_fail(ws, -EMSGSIZE, NULL);
	if (ws->start > 0 && (ws->len + len > ws->cap ||
	    ws->start > ws->cap / 2)) {
		memmove(ws->buf, ws->buf + ws->start, pending);
		ws->scan -= ws->start;
		ws->len = pending;
		ws->start = 0;
	}
	want = ws->len + len;
	if (want > ws->cap) {
		ncap = ws->cap ? ws->cap : 4096;
		while (ncap < want)
			ncap *= 2;
		if ((nb = realloc(ws->buf, ncap)) == NULL)
			return -ENOMEM;
		ws->buf = nb;
		ws->cap = ncap;
	}
	memcpy(ws->buf + ws->len, buf, len);
	ws->len += len;
	return 0;
}

/* Parse an event type name; 0 if unknown. */
static enum watch_type
parse_type(const char *s)
{
	for (int t = WATCH_ADDED; t <= WATCH_ERROR; t++)
		if (strcmp(s, watch_type_names[t]) == 0)
			return (enum watch_type)t;
	return 0;
}

/* Fill the fields derived from the object: RV, Status, bookmark marker. */
static void
event_derive(struct watch_event *ev)
{
	json_t *md, *v, *ann;

	md = json_object_get(ev->object, "metadata");
	v = json_object_get(md, "resourceVersion");
	ev->resource_version = json_is_string(v) ? json_string_value(v) : NULL;
	ev->reason = "";
	ev->message = "";
	if (ev->type == WATCH_ERROR) {
		v = json_object_get(ev->object, "code");
		ev->code = json_is_integer(v) ? (long)json_integer_value(v) : 0;
		v = json_object_get(ev->object, "reason");
		if (json_is_string(v))
			ev->reason = json_string_value(v);
		v = json_object_get(ev->object, "message");
		if (json_is_string(v))
			ev->message = json_string_value(v);
		ev->expired = ev->code == 410 ||
		    strcmp(ev->reason, "Expired") == 0 ||
		    strcmp(ev->reason, "Gone") == 0;
	}
	if (ev->type == WATCH_BOOKMARK) {
		ann = json_object_get(md, "annotations");
		v = json_object_get(ann, "k8s.io/initial-events-end");
		ev->initial_events_end = json_is_string(v) &&
		    strcmp(json_string_value(v), "true") == 0;
	}
}

/* Decode one line holding one watch event. */
int
watchstream_decode_line(const char *line, size_t len, struct watch_event *ret,
    char *err, size_t errlen)
{
	struct watch_event ev;
	json_error_t jerr;
	json_t *root, *type, *obj;

	memset(&ev, 0, sizeof(ev));
	if (jscan_depth(line, len) > WATCHSTREAM_MAX_DEPTH) {
		snprintf(err, errlen, "JSON nested deeper than %d",
		    WATCHSTREAM_MAX_DEPTH);
		return -EBADMSG;
	}
	root = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	if (root == NULL) {
		snprintf(err, errlen, "malformed JSON at column %d: %s",
		    jerr.column, jerr.text);
		return -EBADMSG;
	}
	type = json_object_get(root, "type");
	obj = json_object_get(root, "object");
	if (!json_is_string(type) || !json_is_object(obj)) {
		snprintf(err, errlen, "not a watch event (type/object missing)");
		goto fail;
	}
	if ((ev.type = parse_type(json_string_value(type))) == 0) {
		snprintf(err, errlen, "unknown watch event type");
		goto fail;
	}
	ev.object = json_incref(obj);
	json_decref(root);
	event_derive(&ev);
	*ret = ev;
	return 0;
fail:
	json_decref(root);
	return -EBADMSG;
}

/* Decode the next complete line, skipping blank ones. */
int
watchstream_next(struct watchstream *ws, struct watch_event *ret)
{
	char *nl, *line, err[128];
	size_t llen;
	int r;

	for (;;) {
		if (ws->err)
			return ws->err;
		nl = ws->scan < ws->len ? memchr(ws->buf + ws->scan, '\n',
		    ws->len - ws->scan) : NULL;
		if (nl == NULL) {
			ws->scan = ws->len;
			if (ws->len - ws->start > ws->max_line)
				return ws_fail(ws, -EMSGSIZE, NULL);
			return 0;
		}
		line = ws->buf + ws->start;
		llen = (size_t)(nl - line);
		ws->start = ws->scan = (size_t)(nl - ws->buf) + 1;
		if (llen > ws->max_line)
			return ws_fail(ws, -EMSGSIZE, NULL);
		while (llen > 0 && (line[llen - 1] == '\r' ||
		    line[llen - 1] == ' ' || line[llen - 1] == '\t'))
			llen--;
		if (llen == 0) {
			ws->lineno++;
			continue;
		}
		r = watchstream_decode_line(line, llen, ret, err, sizeof(err));
		if (r == -EBADMSG)
			return ws_fail(ws, r, err);
		if (r < 0)
			return r;
		ws->lineno++;
		ws->count++;
		return 1;
	}
}

/* Whether the stream ended cleanly at a line boundary. */
int
watchstream_end(struct watchstream *ws)
{
	if (ws->err)
		return ws->err;
	for (size_t i = ws->start; i < ws->len; i++) {
		char ch = ws->buf[i];

		if (ch != ' ' && ch != '\t' && ch != '\r' && ch != '\n')
			return ws_fail(ws, -EPROTO,
			    "stream ended inside a line");
	}
	return 0;
}

/* The reason for the sticky error, or "". */
const char *
watchstream_error(const struct watchstream *ws)
{
	return ws->errmsg;
}

/* Events decoded so far. */
unsigned long
watchstream_count(const struct watchstream *ws)
{
	return ws->count;
}

/* Drop the event's reference to its object. */
void
watch_event_clear(struct watch_event *ev)
{
	if (ev == NULL)
		return;
	json_decref(ev->object);
	memset(ev, 0, sizeof(*ev));
}

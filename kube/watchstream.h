/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pure streaming decoder for Kubernetes watch responses: bytes in, one
 * {type, object} event out per complete line. No I/O, no logging. Every size
 * the server controls is capped: a line longer than max_line is an error,
 * as is malformed JSON, an unknown event type, or a truncated last line.
 *
 * Use: watchstream_feed() the bytes of each read, then call
 * watchstream_next() until it returns 0 (needs more) or an error; at end of
 * stream call watchstream_end() to find out whether a partial line was left.
 */
#ifndef KPGPUD_WATCHSTREAM_H
#define KPGPUD_WATCHSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>

#define WATCHSTREAM_DEFAULT_MAX_LINE	(16u << 20)	/* 16 MiB */
#define WATCHSTREAM_MAX_DEPTH		128		/* JSON nesting cap */

enum watch_type {
	WATCH_ADDED = 1,
	WATCH_MODIFIED,
	WATCH_DELETED,
	WATCH_BOOKMARK,
	WATCH_ERROR,
};

/* One decoded event. object is owned by the event (watch_event_clear). */
struct watch_event {
	enum watch_type	 type;
	json_t		*object;	/* always a JSON object */
	/* borrowed from object: metadata.resourceVersion, or NULL */
	const char	*resource_version;
	/* WATCH_ERROR only: the Status fields (0 / "" when absent) */
	long		 code;
	const char	*reason;
	const char	*message;
	/* WATCH_ERROR with code 410 or reason Expired/Gone: relist */
	bool		 expired;
	/* BOOKMARK carrying k8s.io/initial-events-end: "true" */
	bool		 initial_events_end;
};

struct watchstream;

/* New decoder; max_line 0 means WATCHSTREAM_DEFAULT_MAX_LINE. NULL: ENOMEM. */
struct watchstream *watchstream_new(size_t max_line);
void	 watchstream_free(struct watchstream *ws);

/*
 * Append bytes. Returns 0, -ENOMEM, -EMSGSIZE when the pending partial line
 * already exceeds the cap, or the stream's earlier error (errors stick).
 */
int	 watchstream_feed(struct watchstream *ws, const void *buf, size_t len);
/*
 * Decode the next complete line into *ret (blank lines are skipped).
 * Returns 1 with an event, 0 when more bytes are needed, or a negative
 * errno: -EMSGSIZE (line over the cap), -EBADMSG (malformed JSON or not a
 * watch event), -ENOMEM. After an error the stream stays failed.
 */
int	 watchstream_next(struct watchstream *ws, struct watch_event *ret);
/* At end of stream: 0 if nothing is pending, -EPROTO for a truncated line. */
int	 watchstream_end(struct watchstream *ws);
/* Human-readable reason for the last error ("" if none); never has secrets. */
const char *watchstream_error(const struct watchstream *ws);
/* Number of events decoded so far. */
unsigned long watchstream_count(const struct watchstream *ws);

/*
 * Decode one line (without its newline) into *ret. Returns 0, -EBADMSG or
 * -ENOMEM with a reason in err. ret is untouched on failure.
 */
int	 watchstream_decode_line(const char *line, size_t len,
	    struct watch_event *ret, char *err, size_t errlen);
/* Release the event's object and reset it; NULL-safe. */
void	 watch_event_clear(struct watch_event *ev);
/* "ADDED", "MODIFIED", ... for logs. */
const char *watch_type_name(enum watch_type t);

#endif

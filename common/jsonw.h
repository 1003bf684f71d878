/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one JSON writer: strings and whole jansson trees written byte for
 * byte as jansson 2.14's json_dumps(JSON_COMPACT | JSON_SORT_KEYS) writes
 * them, without its per-character encoder (some 80 K instructions for a
 * request body). Where writing it here would take more than a few bytes of
 * stack or a formatter of its own (a real, an object of more than
 * JSONW_MAX_KEYS members, nesting deeper than JSONW_MAX_DEPTH), the
 * writers say so and the caller asks jansson; jsonw_dump() does that
 * itself. A value that is not an object or array is written as
 * JSON_ENCODE_ANY has jansson write it. Strings are copied as they are:
 * jansson's dumper would refuse one that is not UTF-8, but only a _nocheck
 * setter can put one in a tree (jscan_load() uses them on text it checked).
 * The reader is common/jscan.h. Pure: no I/O, no logging.
 */
#ifndef KPGPUD_JSONW_H
#define KPGPUD_JSONW_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#define JSONW_MAX_DEPTH	32	/* nesting jsonw_dump_to() writes */
#define JSONW_MAX_KEYS	64	/* members of an object it sorts */

struct buf;

/*
 * Whether the n bytes at s are their own JSON string text: no control
 * byte, quote or backslash, so "s" needs no escape.
 */
bool	 jsonw_plain(const char *s, size_t n);

/*
 * Append s (n bytes of UTF-8) as a JSON string, quoted and escaped exactly
 * as jansson's compact dump writes it: \" \\ \b \f \n \r \t, other
 * control characters as \u00XX, everything else (also non-ASCII) as is.
 * 0 or the buffer's -ENOMEM / -E2BIG.
 */
int	 jsonw_put_str(struct buf *b, const char *s, size_t n);

/*
 * Append v to b as json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS) writes it:
 * 0, 1 for a value it leaves to jansson (see above; b then holds part of
 * it), or -ENOMEM / -E2BIG.
 */
int	 jsonw_dump_to(struct buf *b, json_t *v);

/*
 * Append the members of o whose names start with prefix as
 * jsonw_dump_to() would append an object of just them ("{}" when o is
 * NULL or not an object), without building that object. 0, 1 or -errno as
 * jsonw_dump_to().
 */
int	 jsonw_members_to(struct buf *b, json_t *o, const char *prefix);

/*
 * The bytes of json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS) in a new
 * string (to free), by jsonw_dump_to() whenever it can. NULL for a NULL v
 * or on ENOMEM.
 */
char	*jsonw_dump(json_t *v);

#endif

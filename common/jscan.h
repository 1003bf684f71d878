/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A single-pass JSON scanner for untrusted request bodies: it validates a
 * whole document as strictly as jansson's json_loadb() with no flags does
 * (RFC 8259 grammar, an object or array at the top, strict UTF-8, no
 * \u0000, no lone surrogates, integers within 64 bits, finite reals, at
 * most JSCAN_MAX_DEPTH levels, nothing but white space after the value)
 * and records where a few members chosen by a schema are, without building a
 * tree or allocating. Duplicate members: the last one wins, as in jansson;
 * member names are compared after unescaping. One difference: jansson
 * skips a single NUL byte right after a number or a literal (its stream
 * loses a pushed-back NUL); jscan refuses it, as RFC 8259 does, so a caller
 * that must answer exactly as jansson would re-parse what jscan refuses
 * (jscan_load() does). The readers on top of it: jscan_load() builds
 * json_loadb()'s tree from the text jscan accepted, the steppers walk it,
 * jscan_unescape() is the one unescaper and jscan_depth() bounds what a
 * recursive parser is handed. The one writer is common/jsonw.h.
 * Pure: no I/O, no logging. Reals are range-checked with strtod(), so
 * LC_NUMERIC must be "C".
 */
#ifndef KPGPUD_JSCAN_H
#define KPGPUD_JSCAN_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#define JSCAN_MAX_DEPTH	2048	/* jansson's JSON_PARSER_MAX_DEPTH */
#define JSCAN_MAX_NODES	32

/*
 * One member the caller wants: node 0 is the document itself. A node with
 * no key stands for each element of its parent (an array); its spans, and
 * those of its descendants (the nodes right after it), are copied for each
 * element into the caller's struct jscan_list.
 */
struct jscan_node {
	int		 parent;	/* index of the parent node; -1 for 0 */
	const char	*key;		/* member name (ASCII) in the parent;
					   NULL: each element */
};

/* Where a value is in the document; len 0 when it is absent. */
struct jscan_span {
	size_t		 off;
	size_t		 len;
};

/*
 * The elements of a list, for an element node e: element k's spans (of e
 * and its descendants, width of them) are rec[k * width ...].
 */
struct jscan_list {
	struct jscan_span	*rec;		/* cap * width spans */
	size_t			 cap;		/* elements rec can hold */
	size_t			 width;		/* e and its descendants */
	size_t			 n;		/* elements in the list; more
						   than cap: not all recorded */
};

/*
 * Validate buf and fill spans[i] for each of the nnodes schema nodes (the
 * last occurrence of each, within the last occurrence of its parent), and
 * lists[e] for each element node e (lists may be NULL when there is none;
 * the caller sets rec, cap and width). Returns 0, or -EINVAL when buf is not
 * JSON as jansson reads it (spans are then unspecified). nnodes is at most
 * JSCAN_MAX_NODES; parents come before their children.
 */
int	 jscan_run(const char *buf, size_t len, const struct jscan_node *nodes,
	    size_t nnodes, struct jscan_span *spans, struct jscan_list *lists);

/* 0 when buf is one JSON document (as json_loadb(buf, len, 0) reads it). */
int	 jscan_validate(const char *buf, size_t len);

/*
 * The tree json_loadb(buf, len, 0, NULL) gives, or NULL where it gives
 * none (not JSON, or out of memory). Built from the text jscan_validate()
 * accepted without jansson's lexer (about a tenth of its cost); what the
 * scanner refuses goes to json_loadb(), which has the last word (a NUL
 * after a number or a literal, above).
 */
json_t	*jscan_load(const char *buf, size_t len);

/*
 * The deepest nesting of brackets in buf outside strings, for any text,
 * JSON or not: checked before a line goes to a recursive parser.
 */
int	 jscan_depth(const char *buf, size_t len);

/*
 * Step through the elements of an array that jscan_run() accepted: *pos
 * starts at the '[' and is advanced; returns 1 with the next element in
 * *elem, 0 after the last one. len is where the array ends (its span's
 * off + len), so that what follows it is not taken for an element.
 */
int	 jscan_next_elem(const char *buf, size_t len, size_t *pos,
	    struct jscan_span *elem);

/*
 * Step through the members of an object that jscan_run() accepted: *pos
 * starts at the '{' and is advanced; returns 1 with the next member's name
 * (the string with its quotes) in *key and its value in *val, 0 after the
 * last one. len is where the object ends, as for jscan_next_elem().
 */
int	 jscan_next_member(const char *buf, size_t len, size_t *pos,
	    struct jscan_span *key, struct jscan_span *val);

/*
 * Whether the value at sp of text jscan_run() accepted is a string whose
 * unescaped bytes are want (at most 64 bytes).
 */
bool	 jscan_str_is(const char *buf, struct jscan_span sp, const char *want);

/*
 * The JSON primitives every reader of kpgpud-admit uses (the scanner, the
 * review loader, the head reader) and the kube client's answers to writes
 * (kube/kube.c): one white-space rule, one unescaper.
 */

/* Whether c is JSON white space. */
static inline bool
jscan_is_ws(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The first position from pos on that is not white space (len at most). */
static inline size_t
jscan_skip_ws(const char *buf, size_t pos, size_t len)
{
	while (pos < len && (unsigned char)buf[pos] <= ' ' &&
	    jscan_is_ws((unsigned char)buf[pos]))
		pos++;
	return pos;
}

/*
 * Unescape the n bytes between the quotes of a string the scanner accepted
 * (every escape valid, surrogates paired) into out as UTF-8; out holds n
 * bytes and may be in itself (the text never grows). The length written.
 */
size_t	 jscan_unescape(const char *in, size_t n, char *out);

#endif

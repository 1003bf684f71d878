/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for kpgpud-admit/httphead.c, the webhook's HTTP/1.1
 * framing of what a peer sends. The first byte sets the size of the pieces
 * the rest arrives in; the rest is a connection's bytes: requests one after
 * another, as a pipelining client would send them. Each head is found by
 * httphead_end (resumed piece by piece, and found where a one-shot search
 * finds it), parsed, and its body framed by Content-Length or decoded in
 * place from chunks under a small body cap. Checked: every offset stays in
 * the head, no head is accepted with both a length and chunked, a refusal
 * carries a status, decoding in pieces gives the bytes, the verdict and the
 * end that decoding in one go gives, and the body never passes the cap.
 * fuzz-sources: kpgpud-admit/httphead.c
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kpgpud-admit/httphead.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FH_MAX_BODY	4096

/* Check an accepted head's invariants. */
static void
check_head(const char *b, const struct httphead *h)
{
	char v[16];

	if (h->head_len < 16 || h->path_len == 0 ||
	    h->path_off + h->path_len > h->head_len || b[h->path_off] != '/' ||
	    (h->query_len > 0 && h->query_off + h->query_len > h->head_len) ||
	    (h->has_ctype && h->ctype_off + h->ctype_len > h->head_len) ||
	    (h->chunked && h->content_length >= 0) || h->minor > 1 ||
	    (h->minor == 0 && (!h->close || h->chunked)))
		abort();
	if (httphead_query(b + h->query_off, h->query_len, "timeout", v,
	    sizeof(v)) && strlen(v) >= sizeof(v))
		abort();
}

/* Decode a chunked body in pieces of step, then in one go; same result. */
static int
chunked(char *buf, const char *src, size_t len, size_t step, size_t *ret_end)
{
	struct httpchunk a = { 0 }, b = { 0 };
	char *one = malloc(len + 1);
	size_t have = 0, pos = 0, out = 0, pos1 = 0, out1 = 0;
	int r = 0, r1;

	if (one == NULL)
		abort();
	while (r == 0 && have < len) {
		size_t n = len - have < step ? len - have : step;

		memcpy(buf + have, src + have, n);
		have += n;
		r = httphead_chunked(&a, buf, have, &pos, &out, FH_MAX_BODY);
		if (out > pos || pos > have || out > FH_MAX_BODY)
			abort();
	}
	memcpy(one, src, len);
	r1 = httphead_chunked(&b, one, len, &pos1, &out1, FH_MAX_BODY);
	if (r != r1 || (r >= 0 && (out != out1 ||
	    memcmp(buf, one, out) != 0)) || (r == 1 && pos != pos1))
		abort();
	free(one);
	*ret_end = pos;
	return r;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *in = (const char *)data + 1;
	size_t len = size > 0 ? size - 1 : 0, off = 0, step;
	char *buf;

	if (size == 0)
		return 0;
	step = (size_t)data[0] % 64 + 1;
	if ((buf = malloc(len + 1)) == NULL)
		abort();
	while (off < len) {
		struct httphead h;
		size_t scan = 0, scan1 = 0, end = 0, end1, have, body_end;
		int st = 0;

		for (have = 0; end == 0 && have < len - off;) {
			have += len - off - have < step ? len - off - have :
			    step;
			end = httphead_end(in + off, have, &scan);
		}
		end1 = httphead_end(in + off, len - off, &scan1);
		if (end != end1)
			abort();
		if (end == 0)
			break;
		if (httphead_parse(in + off, end, &h, &st) < 0) {
			if (st < 400 || st > 505)
				abort();
			break;
		}
		check_head(in + off, &h);
		if (h.chunked) {
			if (chunked(buf, in + off + end, len - off - end, step,
			    &body_end) != 1)
				break;
		} else {
			body_end = h.content_length > 0 ?
			    (size_t)h.content_length : 0;
			if (body_end > len - off - end)
				break;
		}
		off += end + body_end;
	}
	free(buf);
	return 0;
}

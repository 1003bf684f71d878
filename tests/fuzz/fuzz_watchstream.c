/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for kube/watchstream.c: the first byte picks the read
 * size, the rest is a watch response body fed in pieces of that size with
 * a small line cap, drained after every piece, then ended.
 * fuzz-sources: kube/watchstream.c common/jscan.c
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kube/watchstream.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Feed one input through a decoder and check what comes out. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct watchstream *ws;
	struct watch_event ev;
	size_t piece, off = 1;
	int r = 0;

	if (size < 1)
		return 0;
	piece = (size_t)data[0] % 64 + 1;
	if ((ws = watchstream_new(2048)) == NULL)
		return 0;
	while (off < size && r >= 0) {
		size_t n = size - off < piece ? size - off : piece;

		r = watchstream_feed(ws, data + off, n);
		off += n;
		while (r >= 0 && (r = watchstream_next(ws, &ev)) == 1) {
			if (ev.object == NULL || ev.type < WATCH_ADDED ||
			    ev.type > WATCH_ERROR)
				__builtin_trap();
			(void)strlen(watch_type_name(ev.type));
			if (ev.resource_version != NULL)
				(void)strlen(ev.resource_version);
			watch_event_clear(&ev);
		}
	}
	if (r >= 0)
		r = watchstream_end(ws);
	if (r < 0 && watchstream_error(ws)[0] == '\0' && r != -ENOMEM)
		__builtin_trap();
	watchstream_free(ws);
	return 0;
}

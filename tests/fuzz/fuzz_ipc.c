/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for everything an IPC peer controls: the frame reader
 * (length header, reassembly across chunks, limits) and every message
 * decoder (reached through the type field). A message that decodes must
 * re-encode to bytes that decode to the same message.
 *
 * fuzz-sources: ipc/proto.c ipc/frame.c
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "ipc/ipc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* decode -> encode -> decode -> encode must give the same bytes twice. */
static void
check_roundtrip(const struct ipc_msg *m)
{
	uint8_t *b1, *b2;
	size_t l1, l2;
	struct ipc_msg d;

	if (ipc_msg_encode(m, 0, &b1, &l1) < 0)
		abort();	/* a decoded message is always encodable */
	if (ipc_msg_decode(b1 + IPC_FRAME_HDR, l1 - IPC_FRAME_HDR, &d,
	    NULL) < 0)
		abort();
	if (ipc_msg_encode(&d, 0, &b2, &l2) < 0 || l1 != l2 ||
	    memcmp(b1, b2, l1) != 0)
		abort();
	ipc_msg_clear(&d);
	free(b1);
	free(b2);
}

/* Feed data to a frame reader in chunks; decode every whole frame. */
static void
read_frames(const uint8_t *data, size_t size, size_t chunk, size_t max)
{
	struct evbuffer *in = evbuffer_new();
	struct ipc_msg m;
	size_t off = 0;
	int rc = 0;

	if (in == NULL)
		return;
	while (off < size && rc >= 0) {
		size_t n = size - off < chunk ? size - off : chunk;

		evbuffer_add(in, data + off, n);
		off += n;
		while ((rc = ipc_frame_read(in, max, &m, NULL)) == 1) {
			check_roundtrip(&m);
			ipc_msg_clear(&m);
		}
	}
	evbuffer_free(in);
}

/* One input: as a frame body, and as a chunked frame stream. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ipc_msg m;

	if (ipc_msg_decode(data, size, &m, NULL) == 0) {
		check_roundtrip(&m);
		ipc_msg_clear(&m);
	}
	if (size > 0)
		read_frames(data + 1, size - 1, (size_t)(data[0] % 17) + 1,
		    data[0] & 0x80 ? 64 : 0);
	return 0;
}

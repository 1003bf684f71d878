/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Framing: a 4-byte big-endian length, then one msgpack value (proto.c).
 * Frames are reassembled from an evbuffer however the bytes arrived.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include <event2/buffer.h>

#include "ipc/ipc.h"

/* Take and decode one whole frame from in, if it holds one. */
int
ipc_frame_read(struct evbuffer *in, size_t max_frame, struct ipc_msg *ret,
    const char **ret_why)
{
	uint8_t hdr[IPC_FRAME_HDR];
	const uint8_t *body;
	size_t len;
	int rc;

	if (max_frame == 0 || max_frame > IPC_FRAME_MAX)
		max_frame = IPC_FRAME_MAX;
	if (evbuffer_copyout(in, hdr, sizeof(hdr)) < (ev_ssize_t)sizeof(hdr))
		return 0;
	len = (size_t)hdr[0] << 24 | (size_t)hdr[1] << 16 |
	    (size_t)hdr[2] << 8 | hdr[3];
	if (len == 0 || len > max_frame) {
		if (ret_why != NULL)
			*ret_why = len == 0 ? "empty frame" :
			    "frame length over the limit";
		return -EMSGSIZE;
	}
	if (evbuffer_get_length(in) < IPC_FRAME_HDR + len)
		return 0;
	body = evbuffer_pullup(in, (ev_ssize_t)(IPC_FRAME_HDR + len));
	if (body == NULL)
		return -ENOMEM;
	rc = ipc_msg_decode(body + IPC_FRAME_HDR, len, ret, ret_why);
	evbuffer_drain(in, IPC_FRAME_HDR + len);
	return rc < 0 ? rc : 1;
}

/* Encode msg and append its frame to out. */
int
ipc_frame_write(struct evbuffer *out, const struct ipc_msg *msg,
    size_t max_frame)
{
	uint8_t *buf;
	size_t len;
	int rc;

	if ((rc = ipc_msg_encode(msg, max_frame, &buf, &len)) < 0)
		return rc;
	rc = evbuffer_add(out, buf, len) == 0 ? 0 : -ENOMEM;
	free(buf);
	return rc;
}


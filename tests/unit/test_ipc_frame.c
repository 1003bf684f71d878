/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ipc/frame.c: frames are reassembled from any split of the byte stream,
 * several frames in one read come out one by one, and bad length headers
 * (zero, over the limit, over a lowered limit) are refused.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "common/util.h"
#include "ipc/ipc.h"
#include "tests/unit/test.h"

/* Append the frame of a PING with id to buf; returns the frame length. */
static size_t
add_ping(struct evbuffer *buf, uint32_t id)
{
	struct ipc_msg m;
	size_t before = evbuffer_get_length(buf);

	memset(&m, 0, sizeof(m));
	m.type = IPC_PING;
	m.id = id;
	if (ipc_frame_write(buf, &m, 0) < 0)
		return 0;
	return evbuffer_get_length(buf) - before;
}

/* Feed stream to a reader in chunks of the given size; count whole frames. */
static void
feed_in_chunks(const uint8_t *stream, size_t len, size_t chunk, int nframes)
{
	struct evbuffer *in = evbuffer_new();
	uint32_t next_id = 1;
	size_t off = 0;
	struct ipc_msg m;

	while (off < len) {
		size_t n = len - off < chunk ? len - off : chunk;
		int rc;

		evbuffer_add(in, stream + off, n);
		off += n;
		while ((rc = ipc_frame_read(in, 0, &m, NULL)) == 1) {
			CHECK_INT(m.type, IPC_PING);
			CHECK_INT(m.id, next_id);
			next_id++;
			ipc_msg_clear(&m);
		}
		CHECK_INT(rc, 0);
	}
	CHECK_INT(next_id - 1, nframes);
	CHECK_INT(evbuffer_get_length(in), 0);
	evbuffer_free(in);
}

TEST(reassembly_across_partial_reads)
{
	struct evbuffer *out = evbuffer_new();
	uint8_t *stream;
	size_t len;

	for (uint32_t id = 1; id <= 5; id++)
		REQUIRE(add_ping(out, id) > IPC_FRAME_HDR);
	len = evbuffer_get_length(out);
	stream = malloc(len);
	evbuffer_remove(out, stream, len);
	for (size_t chunk = 1; chunk <= len; chunk++)
		feed_in_chunks(stream, len, chunk, 5);
	free(stream);
	evbuffer_free(out);
}

TEST(header_alone_waits)
{
	struct evbuffer *in = evbuffer_new();
	struct ipc_msg m;

	evbuffer_add(in, "\x00\x00\x00\x05", 4);
	CHECK_INT(ipc_frame_read(in, 0, &m, NULL), 0);
	evbuffer_add(in, "\x92\x05", 2);
	CHECK_INT(ipc_frame_read(in, 0, &m, NULL), 0);
	CHECK_INT(evbuffer_get_length(in), 6);
	evbuffer_free(in);
}

TEST(bad_lengths)
{
	struct evbuffer *in = evbuffer_new();
	const char *why = NULL;
	struct ipc_msg m;

	evbuffer_add(in, "\x00\x00\x00\x00", 4);
	CHECK_INT(ipc_frame_read(in, 0, &m, &why), -EMSGSIZE);
	CHECK_STR(why, "empty frame");
	evbuffer_drain(in, 4);
	evbuffer_add(in, "\x00\x10\x00\x01", 4);	/* 1 MiB + 1 */
	CHECK_INT(ipc_frame_read(in, 0, &m, &why), -EMSGSIZE);
	evbuffer_drain(in, 4);
	evbuffer_add(in, "\x00\x10\x00\x00", 4);	/* exactly 1 MiB: waits */
	CHECK_INT(ipc_frame_read(in, 0, &m, &why), 0);
	CHECK_INT(ipc_frame_read(in, 1000, &m, &why), -EMSGSIZE);
	evbuffer_free(in);
}

TEST(lowered_limit)
{
	struct evbuffer *buf = evbuffer_new();
	struct ipc_msg m;
	size_t flen = add_ping(buf, 7);

	REQUIRE(flen > IPC_FRAME_HDR);
	CHECK_INT(ipc_frame_read(buf, flen - IPC_FRAME_HDR - 1, &m, NULL),
	    -EMSGSIZE);
	evbuffer_drain(buf, evbuffer_get_length(buf));
	add_ping(buf, 7);
	CHECK_INT(ipc_frame_read(buf, flen - IPC_FRAME_HDR, &m, NULL), 1);
	CHECK_INT(m.id, 7);
	ipc_msg_clear(&m);
	evbuffer_free(buf);
}

TEST(bad_body_is_consumed)
{
	struct evbuffer *in = evbuffer_new();
	const char *why = NULL;
	struct ipc_msg m;

	/* a frame whose value has a byte after it, then a good frame */
	evbuffer_add(in, "\x00\x00\x00\x02\xc0\xc0", 6);
	add_ping(in, 3);
	CHECK_INT(ipc_frame_read(in, 0, &m, &why), -EBADMSG);
	CHECK_STR(why, "bytes after the value");
	CHECK_INT(ipc_frame_read(in, 0, &m, &why), 1);
	CHECK_INT(m.id, 3);
	ipc_msg_clear(&m);
	evbuffer_free(in);
}

TEST(uid_list)
{
	uid_t u[IPC_UIDS_MAX];
	size_t n = 0;
	char bad[64];

	/* the daemons' one uid-list parser fills a socket's allowlist */
	CHECK_INT(parse_uid_list("0,65534", u, IPC_UIDS_MAX, &n, bad,
	    sizeof(bad)), 0);
	CHECK_INT(n, 2);
	CHECK_INT(u[1], 65534);
	CHECK(ipc_uid_allowed(u, n, 65534));
	CHECK(ipc_uid_allowed(u, 0, geteuid()));
	CHECK(!ipc_uid_allowed(u, 0, geteuid() + 1));
	u[0] = 4242;
	CHECK(ipc_uid_allowed(u, 1, 4242));
	CHECK(!ipc_uid_allowed(u, 1, geteuid()));
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The USAGE and USAGE_RESULT messages: round trip through the one schema
 * table, the request's own rules (known view, non-empty window, id), and
 * the caps a peer controls (rows, string fields, detail).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ipc/proto.h"
#include "tests/unit/test.h"

/* Encode m and decode the frame body again into ret. */
static int
roundtrip(const struct ipc_msg *m, struct ipc_msg *ret)
{
	uint8_t *b;
	size_t n;
	int r;

	if ((r = ipc_msg_encode(m, 0, &b, &n)) < 0)
		return r;
	r = ipc_msg_decode(b + IPC_FRAME_HDR, n - IPC_FRAME_HDR, ret, NULL);
	free(b);
	return r;
}

TEST(ipc_usage_request)
{
	struct ipc_msg m, d;

	memset(&m, 0, sizeof(m));
	m.type = IPC_USAGE;
	m.id = 3;
	m.deadline_ms = 100;
	m.u.usage.view = IPC_USAGE_POD;
	m.u.usage.since_us = 5;
	m.u.usage.until_us = 1ull << 62;
	m.u.usage.offset = 200;
	REQUIRE(roundtrip(&m, &d) == 0);
	CHECK_INT(d.type, IPC_USAGE);
	CHECK_INT(d.u.usage.view, IPC_USAGE_POD);
	CHECK_INT(d.u.usage.since_us, 5);
	CHECK(d.u.usage.until_us == 1ull << 62);
	CHECK_INT(d.u.usage.offset, 200);
	CHECK(ipc_type_is_request(IPC_USAGE));
	CHECK(ipc_type_is_reply(IPC_USAGE_RESULT));
	CHECK_STR(ipc_type_name(IPC_USAGE_RESULT), "USAGE_RESULT");
	ipc_msg_clear(&d);
	m.u.usage.view = IPC_USAGE_VIEWS;	/* unknown view */
	CHECK(roundtrip(&m, &d) < 0);
	m.u.usage.view = IPC_USAGE_TENANT;
	m.u.usage.since_us = m.u.usage.until_us;	/* empty window */
	CHECK(roundtrip(&m, &d) < 0);
	m.u.usage.since_us = 0;
	m.id = 0;
	CHECK(roundtrip(&m, &d) < 0);
}

TEST(ipc_usage_result)
{
	struct ipc_msg m, d;
	struct ipc_usage_row *rows = calloc(IPC_USAGE_ROWS_MAX + 1,
	    sizeof(*rows));
	char *big = malloc(IPC_DETAIL_MAX + 2);

	REQUIRE(rows != NULL && big != NULL);
	memset(&m, 0, sizeof(m));
	m.type = IPC_USAGE_RESULT;
	m.id = 3;
	m.u.usage_result.rows = rows;
	m.u.usage_result.nrows = 2;
	m.u.usage_result.more = true;
	m.u.usage_result.lost = 4;
	m.u.usage_result.now_us = 99;
	strcpy(rows[0].ns, "ta");
	strcpy(rows[0].instance, "Agent/a");
	strcpy(rows[0].key, "claim-1");
	strcpy(rows[0].profile, "1g.10gb");
	rows[0].device_ms = 3047;
	rows[0].gpu_ms = 435;
	rows[0].open = 1;
	rows[1].detail = "{\"mode\":\"mig\"}";
	REQUIRE(roundtrip(&m, &d) == 0);
	CHECK_INT(d.u.usage_result.nrows, 2);
	CHECK(d.u.usage_result.more);
	CHECK_INT(d.u.usage_result.lost, 4);
	CHECK_STR(d.u.usage_result.rows[0].key, "claim-1");
	CHECK_INT(d.u.usage_result.rows[0].device_ms, 3047);
	CHECK_STR(d.u.usage_result.rows[0].detail, "");	/* NULL = "" */
	CHECK_STR(d.u.usage_result.rows[1].detail, "{\"mode\":\"mig\"}");
	ipc_msg_clear(&d);
	/* caps: rows, detail */
	m.u.usage_result.nrows = IPC_USAGE_ROWS_MAX + 1;
	CHECK_INT(roundtrip(&m, &d), -EINVAL);
	m.u.usage_result.nrows = 2;
	memset(big, 'x', IPC_DETAIL_MAX + 1);
	big[IPC_DETAIL_MAX + 1] = '\0';
	rows[1].detail = big;
	CHECK_INT(roundtrip(&m, &d), -EINVAL);
	big[IPC_DETAIL_MAX] = '\0';
	CHECK_INT(roundtrip(&m, &d), 0);
	ipc_msg_clear(&d);
	free(big);
	free(rows);
}

TEST(ipc_usage_decoder_caps)
{
	/* [19, {"id":1, "rows": <array of 2001 nils>, ...}] is refused
	   before any row is read */
	uint8_t b[4096];
	size_t n = 0;
	struct ipc_msg d;
	const char *why = NULL;

	b[n++] = 0x92;
	b[n++] = IPC_USAGE_RESULT;
	b[n++] = 0x85;
	b[n++] = 0xa2; memcpy(b + n, "id", 2); n += 2; b[n++] = 1;
	b[n++] = 0xa4; memcpy(b + n, "rows", 4); n += 4;
	b[n++] = 0xdc;
	b[n++] = (IPC_USAGE_ROWS_MAX + 1) >> 8;
	b[n++] = (IPC_USAGE_ROWS_MAX + 1) & 0xff;
	for (int i = 0; i < IPC_USAGE_ROWS_MAX + 1; i++)
		b[n++] = 0xc0;
	b[n++] = 0xa4; memcpy(b + n, "more", 4); n += 4; b[n++] = 0xc2;
	b[n++] = 0xa4; memcpy(b + n, "lost", 4); n += 4; b[n++] = 0;
	b[n++] = 0xa6; memcpy(b + n, "now_us", 6); n += 6; b[n++] = 0;
	CHECK_INT(ipc_msg_decode(b, n, &d, &why), -EBADMSG);
	CHECK_STR(why, "rows is not an array of at most 2000");
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ipc/proto.c: every message round-trips, and every decoder rejects what it
 * does not consume exactly (extra or missing keys, wrong types, bytes after
 * the value, truncation, strings and arrays over their caps).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

#include "common/util.h"
#include "ipc/proto.h"
#include "tests/unit/handpack.c"
#include "tests/unit/test.h"

static struct ipc_ns_item sample_items[2] = {
	{ "team-a", true, "{\"claimTemplateName\":\"gpu-a\"}" },
	{ "team-b", false, NULL },
};
static struct ipc_count sample_counts[2] = {
	{ "Namespace", 12 }, { "Agent", 3 },
};

static struct ipc_usage_row sample_rows[2] = {
	{ .ns = "team-a", .instance = "Agent/a", .key = "c1",
	  .device_ms = 3047, .gpu_ms = 435 },
	{ .ns = "team-b", .detail = "{\"mode\":\"mig\"}" },
};

/* A filled-in sample of each message type. */
static void
sample(enum ipc_type t, struct ipc_msg *m)
{
	memset(m, 0, sizeof(*m));
	m->type = t;
	m->id = 42;
	m->deadline_ms = 250;
	switch (t) {
	case IPC_HELLO:
	case IPC_HELLO_OK:
		m->u.hello.version = IPC_PROTO_VERSION;
		m->u.hello.role = t == IPC_HELLO ? IPC_ROLE_ADMIT : IPC_ROLE_SYNC;
		break;
	case IPC_ERROR:
		m->u.error.code = ETIMEDOUT;
		strcpy(m->u.error.message, "deadline passed");
		break;
	case IPC_NS_LOOKUP:
		strcpy(m->u.ns_lookup.ns, "team-a");
		break;
	case IPC_NS_RESULT:
		m->u.ns_result.found = true;
		m->u.ns_result.isolated = true;
		m->u.ns_result.resolved = "{\"claimName\":\"x\"}";
		m->u.ns_result.generation = 1ull << 40;
		m->u.ns_result.from_api = true;
		break;
	case IPC_NS_LIST:
		strcpy(m->u.ns_list.prefix, "team-");
		m->u.ns_list.limit = 100;
		strcpy(m->u.ns_list.after, "team-a");
		break;
	case IPC_NS_LIST_RESULT:
		m->u.ns_list_result.items = sample_items;
		m->u.ns_list_result.nitems = 2;
		m->u.ns_list_result.more = true;
		break;
	case IPC_SUBSCRIBE:
		m->u.subscribe.topics = IPC_TOPIC_ALL;
		m->u.subscribe.since_generation = 77;
		break;
	case IPC_SNAPSHOT_BEGIN:
	case IPC_SNAPSHOT_END:
		m->u.snapshot.generation = 9;
		m->u.snapshot.full = t == IPC_SNAPSHOT_BEGIN;
		break;
	case IPC_CHANGE:
		m->u.change.generation = 10;
		m->u.change.topic = IPC_TOPIC_NAMESPACES;
		strcpy(m->u.change.kind, "Namespace");
		strcpy(m->u.change.ns, "team-a");
		strcpy(m->u.change.name, "team-a");
		m->u.change.isolated = true;
		m->u.change.resolved = "{}";
		break;
	case IPC_STATUS_RESULT:
		m->u.status_result.synced = true;
		m->u.status_result.generation = 5;
		m->u.status_result.counts = sample_counts;
		m->u.status_result.ncounts = 2;
		break;
	case IPC_FAULT_ARM:
		strcpy(m->u.fault_arm.spec, "sync.apply=error");
		break;
	case IPC_USAGE:
		m->u.usage.view = IPC_USAGE_CLAIM;
		m->u.usage.until_us = 1ull << 50;
		break;
	case IPC_USAGE_RESULT:
		m->u.usage_result.rows = sample_rows;
		m->u.usage_result.nrows = 2;
		m->u.usage_result.lost = 1;
		break;
	default:
		break;
	}
}

/* Encode m and return the body (without the header) in a new buffer. */
static uint8_t *
encode_body(const struct ipc_msg *m, size_t *len)
{
	uint8_t *buf, *body;
	size_t flen;

	if (ipc_msg_encode(m, 0, &buf, &flen) < 0)
		return NULL;
	*len = flen - IPC_FRAME_HDR;
	body = malloc(*len + 1);
	memcpy(body, buf + IPC_FRAME_HDR, *len);
	free(buf);
	return body;
}

TEST(roundtrip_every_type)
{
	for (int t = IPC_HELLO; t < IPC_TYPE_COUNT; t++) {
		struct ipc_msg m, d;
		uint8_t *b1, *b2;
		size_t l1, l2;

		sample((enum ipc_type)t, &m);
		b1 = encode_body(&m, &l1);
		REQUIRE(b1 != NULL);
		CHECK_INT(ipc_msg_decode(b1, l1, &d, NULL), 0);
		CHECK_INT(d.type, t);
		b2 = encode_body(&d, &l2);
		REQUIRE(b2 != NULL);
		if (l1 != l2 || memcmp(b1, b2, l1) != 0)
			test_fail(__FILE__, __LINE__, "%s re-encodes differently",
			    ipc_type_name((enum ipc_type)t));
		ipc_msg_clear(&d);
		free(b1);
		free(b2);
	}
}

TEST(roundtrip_fields)
{
	struct ipc_msg m, d;
	uint8_t *b;
	size_t l;

	sample(IPC_NS_LIST_RESULT, &m);
	b = encode_body(&m, &l);
	REQUIRE(ipc_msg_decode(b, l, &d, NULL) == 0);
	CHECK_INT(d.id, 42);
	CHECK_INT(d.u.ns_list_result.nitems, 2);
	CHECK_STR(d.u.ns_list_result.items[0].name, "team-a");
	CHECK_STR(d.u.ns_list_result.items[0].resolved,
	    "{\"claimTemplateName\":\"gpu-a\"}");
	CHECK(d.u.ns_list_result.items[1].resolved == NULL);
	CHECK(d.u.ns_list_result.more);
	ipc_msg_clear(&d);
	free(b);

	sample(IPC_NS_LOOKUP, &m);
	b = encode_body(&m, &l);
	REQUIRE(ipc_msg_decode(b, l, &d, NULL) == 0);
	CHECK_INT(d.deadline_ms, 250);
	CHECK_STR(d.u.ns_lookup.ns, "team-a");
	ipc_msg_clear(&d);
	free(b);

	sample(IPC_STATUS_RESULT, &m);
	b = encode_body(&m, &l);
	REQUIRE(ipc_msg_decode(b, l, &d, NULL) == 0);
	CHECK_INT(d.u.status_result.ncounts, 2);
	CHECK_STR(d.u.status_result.counts[1].kind, "Agent");
	CHECK_INT(d.u.status_result.counts[0].count, 12);
	CHECK_INT(d.u.status_result.generation, 5);
	ipc_msg_clear(&d);
	free(b);

	sample(IPC_NS_RESULT, &m);
	b = encode_body(&m, &l);
	REQUIRE(ipc_msg_decode(b, l, &d, NULL) == 0);
	CHECK(d.u.ns_result.generation == 1ull << 40);
	CHECK(d.u.ns_result.from_api && d.u.ns_result.isolated);
	ipc_msg_clear(&d);
	free(b);
}

enum mutation { MUT_DROP, MUT_EXTRA, MUT_RETYPE, MUT_DUP };

/* Re-pack a valid body with one key dropped, added, retyped or doubled. */
static uint8_t *
mutate(const uint8_t *body, size_t len, enum mutation mut, uint32_t key,
    size_t *ret_len, uint32_t *ret_nkeys)
{
	msgpack_unpacked up;
	msgpack_sbuffer sb;
	msgpack_packer pk;
	const msgpack_object_map *map;
	uint8_t *out;

	msgpack_unpacked_init(&up);
	if (msgpack_unpack_next(&up, (const char *)body, len, NULL) !=
	    MSGPACK_UNPACK_SUCCESS)
		return NULL;
	map = &up.data.via.array.ptr[1].via.map;
	*ret_nkeys = map->size;
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_array(&pk, 2);
	msgpack_pack_object(&pk, up.data.via.array.ptr[0]);
	msgpack_pack_map(&pk, map->size + (mut == MUT_DROP ? -1u :
	    mut == MUT_RETYPE ? 0 : 1));
	for (uint32_t i = 0; i < map->size; i++) {
		const msgpack_object *v = &map->ptr[i].val;

		if (mut == MUT_DROP && i == key)
			continue;
		msgpack_pack_object(&pk, map->ptr[i].key);
		if (mut == MUT_RETYPE && i == key) {
			if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
				msgpack_pack_str_with_body(&pk, "7", 1);
			else
				msgpack_pack_int(&pk, -1);
		} else {
			msgpack_pack_object(&pk, *v);
		}
		if (mut == MUT_DUP && i == key) {
			msgpack_pack_object(&pk, map->ptr[i].key);
			msgpack_pack_object(&pk, *v);
		}
	}
	if (mut == MUT_EXTRA) {
		msgpack_pack_str_with_body(&pk, "extra", 5);
		msgpack_pack_true(&pk);
	}
	msgpack_unpacked_destroy(&up);
	*ret_len = sb.size;
	out = malloc(sb.size);
	memcpy(out, sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
	return out;
}

TEST(reject_every_mutation_of_every_type)
{
	for (int t = IPC_HELLO; t < IPC_TYPE_COUNT; t++) {
		struct ipc_msg m, d;
		uint8_t *b, *x;
		size_t l, xl;
		uint32_t nkeys = 1;

		sample((enum ipc_type)t, &m);
		b = encode_body(&m, &l);
		REQUIRE(b != NULL);
		for (int mut = MUT_DROP; mut <= MUT_DUP; mut++)
			for (uint32_t k = 0; k < nkeys; k++) {
				x = mutate(b, l, (enum mutation)mut, k, &xl,
				    &nkeys);
				REQUIRE(x != NULL);
				if (ipc_msg_decode(x, xl, &d, NULL) != -EBADMSG)
					test_fail(__FILE__, __LINE__,
					    "%s mutation %d key %u accepted",
					    ipc_type_name((enum ipc_type)t),
					    mut, k);
				free(x);
			}
		/* one byte more, one byte less */
		b[l] = 0xc0;
		CHECK_INT(ipc_msg_decode(b, l + 1, &d, NULL), -EBADMSG);
		CHECK_INT(ipc_msg_decode(b, l - 1, &d, NULL), -EBADMSG);
		free(b);
	}
}

/* Decode a hand-packed [type, body] and return the result. */
static int
decode_packed(msgpack_sbuffer *sb)
{
	struct ipc_msg d;
	int rc;

	rc = ipc_msg_decode((const uint8_t *)sb->data, sb->size, &d, NULL);
	if (rc == 0)
		ipc_msg_clear(&d);
	msgpack_sbuffer_destroy(sb);
	return rc;
}

/* Decode an NS_LOOKUP packed by hand whose namespace is s (n bytes). */
static int
lookup_with_ns(const char *s, size_t n)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;

	handpack_request(&sb, &pk, IPC_NS_LOOKUP, 1);
	handpack_str(&pk, "namespace");
	msgpack_pack_str_with_body(&pk, s, n);
	return decode_packed(&sb);
}

TEST(string_caps_and_nul)
{
	char big[IPC_NS_MAX + 2];

	memset(big, 'a', sizeof(big));
	CHECK_INT(lookup_with_ns(big, IPC_NS_MAX), 0);
	CHECK_INT(lookup_with_ns(big, IPC_NS_MAX + 1), -EBADMSG);
	CHECK_INT(lookup_with_ns("a\0b", 3), -EBADMSG);
}

TEST(array_and_map_caps)
{
	struct ipc_ns_item items[IPC_LIST_MAX + 1];
	struct ipc_count counts[IPC_COUNTS_MAX + 1];
	struct ipc_msg m;
	uint8_t *buf;
	size_t len;

	memset(items, 0, sizeof(items));
	memset(counts, 0, sizeof(counts));
	for (int i = 0; i <= IPC_COUNTS_MAX; i++)
		snprintf(counts[i].kind, sizeof(counts[i].kind), "K%d", i);
	sample(IPC_NS_LIST_RESULT, &m);
	m.u.ns_list_result.items = items;
	m.u.ns_list_result.nitems = IPC_LIST_MAX + 1;
	CHECK_INT(ipc_msg_encode(&m, 0, &buf, &len), -EINVAL);
	m.u.ns_list_result.nitems = IPC_LIST_MAX;
	REQUIRE(ipc_msg_encode(&m, 0, &buf, &len) == 0);
	free(buf);
	sample(IPC_STATUS_RESULT, &m);
	m.u.status_result.counts = counts;
	m.u.status_result.ncounts = IPC_COUNTS_MAX + 1;
	CHECK_INT(ipc_msg_encode(&m, 0, &buf, &len), -EINVAL);

	/* a hand-packed items array one over the cap */
	{
		msgpack_sbuffer sb;
		msgpack_packer pk;

		handpack_begin(&sb, &pk, IPC_NS_LIST_RESULT, 3);
		handpack_str(&pk, "items");
		msgpack_pack_array(&pk, IPC_LIST_MAX + 1);
		for (int i = 0; i <= IPC_LIST_MAX; i++) {
			msgpack_pack_map(&pk, 3);
			handpack_str(&pk, "name");
			handpack_str(&pk, "n");
			handpack_str(&pk, "isolated");
			msgpack_pack_false(&pk);
			handpack_str(&pk, "resolved");
			msgpack_pack_nil(&pk);
		}
		handpack_str(&pk, "more");
		msgpack_pack_false(&pk);
		CHECK_INT(decode_packed(&sb), -EBADMSG);
	}
}

TEST(encode_rejects_bad_messages)
{
	struct ipc_msg m;
	uint8_t *buf;
	size_t len;

	sample(IPC_HELLO, &m);
	m.u.hello.role = IPC_ROLE_NONE;
	CHECK_INT(ipc_msg_encode(&m, 0, &buf, &len), -EINVAL);
	sample(IPC_NS_LIST, &m);
	m.u.ns_list.limit = 0;
	CHECK_INT(ipc_msg_encode(&m, 0, &buf, &len), -EINVAL);
	m.u.ns_list.limit = IPC_LIST_MAX + 1;
	CHECK_INT(ipc_msg_encode(&m, 0, &buf, &len), -EINVAL);
	sample(IPC_SUBSCRIBE, &m);
	m.u.subscribe.topics = 0x8;
	CHECK_INT(ipc_msg_encode(&m, 0, &buf, &len), -EINVAL);
	sample(IPC_CHANGE, &m);
	m.u.change.topic = IPC_TOPIC_ALL;
	CHECK_INT(ipc_msg_encode(&m, 0, &buf, &len), -EINVAL);
	sample(IPC_PING, &m);
	m.id = 0;
	CHECK_INT(ipc_msg_encode(&m, 0, &buf, &len), -EINVAL);
	m.type = IPC_TYPE_COUNT;
	CHECK_INT(ipc_msg_encode(&m, 0, &buf, &len), -EINVAL);
	sample(IPC_NS_RESULT, &m);
	CHECK_INT(ipc_msg_encode(&m, 16, &buf, &len), -EMSGSIZE);
	REQUIRE(ipc_msg_encode(&m, 200, &buf, &len) == 0);
	free(buf);
}

TEST(decode_rejects_shapes)
{
	static const struct { const char *what; const char *b; size_t n; }
	    cases[] = {
		{ "empty", "", 0 },
		{ "nil", "\xc0", 1 },
		{ "reserved byte", "\xc1", 1 },
		{ "unknown type", "\x92\x63\x80", 3 },
		{ "type zero", "\x92\x00\x80", 3 },
		{ "negative type", "\x92\xff\x80", 3 },
		{ "one-element array", "\x91\x05", 2 },
		{ "body not a map", "\x92\x05\x90", 3 },
		{ "huge array count", "\xdd\xff\xff\xff\xff\x01", 6 },
		{ "huge map count", "\xdf\x7f\xff\xff\xff\x01\x02", 7 },
		{ "huge str", "\xdb\x00\x10\x00\x00a", 6 },
		{ "truncated", "\x92\x05", 2 },
		{ "deep nesting", "\x91\x91\x91\x91\x91\x91\x91\x91\x90", 9 },
	};
	struct ipc_msg d;

	for (size_t i = 0; i < nitems(cases); i++) {
		int rc = ipc_msg_decode((const uint8_t *)cases[i].b, cases[i].n,
		    &d, NULL);

		if (rc != -EBADMSG && rc != -EPROTONOSUPPORT)
			test_fail(__FILE__, __LINE__, "%s: rc %d", cases[i].what,
			    rc);
	}
	CHECK_INT(ipc_msg_decode((const uint8_t *)"\x92\x63\x80", 3, &d, NULL),
	    -EPROTONOSUPPORT);
}

TEST(hello_rules)
{
	struct ipc_msg m, d;
	uint8_t *b;
	size_t l;

	sample(IPC_HELLO, &m);
	m.u.hello.version = 99;		/* decodes; the server refuses it */
	b = encode_body(&m, &l);
	REQUIRE(ipc_msg_decode(b, l, &d, NULL) == 0);
	CHECK_INT(d.u.hello.version, 99);
	CHECK_INT(d.u.hello.role, IPC_ROLE_ADMIT);
	ipc_msg_clear(&d);
	free(b);
	CHECK_STR(ipc_role_name(IPC_ROLE_QUOTA), "quota");
	CHECK_INT(ipc_role_parse("ctl"), IPC_ROLE_CTL);
	CHECK_INT(ipc_role_parse("root"), IPC_ROLE_NONE);
	CHECK(ipc_role_name(IPC_ROLE_COUNT) == NULL);
	CHECK(ipc_type_is_request(IPC_NS_LOOKUP));
	CHECK(!ipc_type_is_request(IPC_CHANGE));
	CHECK(ipc_type_is_reply(IPC_SNAPSHOT_BEGIN));
	CHECK(!ipc_type_is_reply(IPC_SNAPSHOT_END));
	CHECK_STR(ipc_type_name(IPC_FAULT_ARM), "FAULT_ARM");
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Hand-packed IPC bodies, for the tests that must send what the encoder
 * never would (wrong types, bytes after the body, arrays over a cap):
 * the head [type, {"id": 1, ...}] such a body starts with. Included by the
 * tests that use it (#include "tests/unit/handpack.c": test_ipc_proto and
 * tests/tools/ipc_rawsend).
 */
#include <stdint.h>
#include <string.h>

#include <msgpack.h>

/* Pack the C string s (a key or a value). */
static void
handpack_str(msgpack_packer *pk, const char *s)
{
	msgpack_pack_str_with_body(pk, s, strlen(s));
}

/* Begin sb with [type, {"id": 1, then the nkeys - 1 keys the caller packs. */
static void
handpack_begin(msgpack_sbuffer *sb, msgpack_packer *pk, uint32_t type,
    uint32_t nkeys)
{
	msgpack_sbuffer_init(sb);
	msgpack_packer_init(pk, sb, msgpack_sbuffer_write);
	msgpack_pack_array(pk, 2);
	msgpack_pack_uint32(pk, type);
	msgpack_pack_map(pk, nkeys);
	handpack_str(pk, "id");
	msgpack_pack_uint32(pk, 1);
}

/* A request's head: "id": 1, "deadline_ms": 0, then nextra keys to pack. */
static void
handpack_request(msgpack_sbuffer *sb, msgpack_packer *pk, uint32_t type,
    uint32_t nextra)
{
	handpack_begin(sb, pk, type, 2 + nextra);
	handpack_str(pk, "deadline_ms");
	msgpack_pack_uint32(pk, 0);
}

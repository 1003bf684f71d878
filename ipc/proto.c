/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kpgpud IPC messages: see proto.h.
 *
 * Each message's schema is one table of fields below, and the one generic
 * encoder and the one generic decoder both walk that table, so the encode and
 * decode side of a message cannot drift apart. The two composite field kinds
 * (the NS_LIST items and the STATUS counts) have their encoder right beside
 * their decoder.
 *
 * Decoding first checks the raw bytes with a small scanner (exactly one
 * value, nesting depth and every declared array/map length bounded by the
 * bytes that remain) before msgpack-c unpacks them, so a 10-byte frame can
 * never make msgpack-c reserve memory for four billion elements.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

#include "common/util.h"
#include "ipc/proto.h"

#define MP_MAX_DEPTH	6

enum fkind {
	F_U32,		/* uint32_t */
	F_U64,		/* uint64_t */
	F_BOOL,		/* bool */
	F_STR,		/* char[cap + 1], NUL-terminated */
	F_STRN,		/* char * (heap on decode), NULL = nil */
	F_ROLE,		/* enum ipc_role as its name */
	F_ITEMS,	/* struct ipc_ns_list_result items */
	F_COUNTS,	/* struct ipc_status_result counts */
	F_ROWS,		/* struct ipc_usage_result rows */
	F_STRD,		/* char * (heap on decode), never nil; NULL = "" */
};

struct field {
	const char	*key;
	enum fkind	 kind;
	size_t		 off;
	size_t		 cap;	/* string length cap */
};

struct schema {
	const char		*name;
	const struct field	*fields;
	size_t			 nfields;
	bool			 request;
	bool			 reply;
	int			(*check)(const struct ipc_msg *m);
};

#define M(f)		offsetof(struct ipc_msg, f)
#define FLD(k, kind, f, cap)	{ k, kind, M(f), cap }
#define ID		FLD("id", F_U32, id, 0)
#define DEADLINE	FLD("deadline_ms", F_U32, deadline_ms, 0)
#define NFIELDS(a)	(nitems(a))

/* ---- message schemas ---- */

static const struct field f_hello[] = {
	FLD("version", F_U32, u.hello.version, 0),
	FLD("role", F_ROLE, u.hello.role, 0),
};
static const struct field f_error[] = {
	ID,
	FLD("code", F_U32, u.error.code, 0),
	FLD("message", F_STR, u.error.message, IPC_MESSAGE_MAX),
};
static const struct field f_id[] = { ID };
static const struct field f_req[] = { ID, DEADLINE };
static const struct field f_ns_lookup[] = {
	ID, DEADLINE,
	FLD("namespace", F_STR, u.ns_lookup.ns, IPC_NS_MAX),
};
static const struct field f_ns_result[] = {
	ID,
	FLD("found", F_BOOL, u.ns_result.found, 0),
	FLD("isolated", F_BOOL, u.ns_result.isolated, 0),
	FLD("resolved", F_STRN, u.ns_result.resolved, IPC_RESOLVED_MAX),
	FLD("generation", F_U64, u.ns_result.generation, 0),
	FLD("from_api", F_BOOL, u.ns_result.from_api, 0),
};
static const struct field f_ns_list[] = {
	ID, DEADLINE,
	FLD("prefix", F_STR, u.ns_list.prefix, IPC_NS_MAX),
	FLD("limit", F_U32, u.ns_list.limit, 0),
	FLD("after", F_STR, u.ns_list.after, IPC_NS_MAX),
};
static const struct field f_ns_list_result[] = {
	ID,
	FLD("items", F_ITEMS, u.ns_list_result, 0),
	FLD("more", F_BOOL, u.ns_list_result.more, 0),
};
static const struct field f_subscribe[] = {
	ID, DEADLINE,
	FLD("topics", F_U32, u.subscribe.topics, 0),
	FLD("since_generation", F_U64, u.subscribe.since_generation, 0),
};
static const struct field f_snapshot_begin[] = {
	ID,
	FLD("generation", F_U64, u.snapshot.generation, 0),
	FLD("full", F_BOOL, u.snapshot.full, 0),
};
static const struct field f_snapshot_end[] = {
	FLD("generation", F_U64, u.snapshot.generation, 0),
};
static const struct field f_change[] = {
	FLD("generation", F_U64, u.change.generation, 0),
	FLD("topic", F_U32, u.change.topic, 0),
	FLD("kind", F_STR, u.change.kind, IPC_KIND_MAX),
	FLD("namespace", F_STR, u.change.ns, IPC_NS_MAX),
	FLD("name", F_STR, u.change.name, IPC_NAME_MAX),
	FLD("deleted", F_BOOL, u.change.deleted, 0),
	FLD("isolated", F_BOOL, u.change.isolated, 0),
	FLD("resolved", F_STRN, u.change.resolved, IPC_RESOLVED_MAX),
};
static const struct field f_status_result[] = {
	ID,
	FLD("synced", F_BOOL, u.status_result.synced, 0),
	FLD("generation", F_U64, u.status_result.generation, 0),
	FLD("counts", F_COUNTS, u.status_result, 0),
};
static const struct field f_fault_arm[] = {
	ID, DEADLINE,
	FLD("spec", F_STR, u.fault_arm.spec, IPC_SPEC_MAX),
};

static const struct field f_usage[] = {
	ID, DEADLINE,
	FLD("view", F_U32, u.usage.view, 0),
	FLD("since_us", F_U64, u.usage.since_us, 0),
	FLD("until_us", F_U64, u.usage.until_us, 0),
	FLD("offset", F_U32, u.usage.offset, 0),
};
static const struct field f_usage_result[] = {
	ID,
	FLD("rows", F_ROWS, u.usage_result, 0),
	FLD("more", F_BOOL, u.usage_result.more, 0),
	FLD("lost", F_U64, u.usage_result.lost, 0),
	FLD("now_us", F_U64, u.usage_result.now_us, 0),
};

/* Fields of one USAGE_RESULT row, relative to struct ipc_usage_row. */
#define UR(k, kind, f, cap) { k, kind, offsetof(struct ipc_usage_row, f), cap }
static const struct field f_row[] = {
	UR("namespace", F_STR, ns, IPC_NS_MAX),
	UR("instance", F_STR, instance, IPC_INSTANCE_MAX),
	UR("key", F_STR, key, IPC_NAME_MAX),
	UR("device_class", F_STR, device_class, IPC_NAME_MAX),
	UR("profile", F_STR, profile, IPC_PROFILE_MAX),
	UR("device_ms", F_U64, device_ms, 0),
	UR("gpu_ms", F_U64, gpu_ms, 0),
	UR("intervals", F_U64, intervals, 0),
	UR("bounded", F_U64, bounded, 0),
	UR("open", F_U64, open, 0),
	UR("detail", F_STRD, detail, IPC_DETAIL_MAX),
};
#undef UR

/* Fields of one NS_LIST_RESULT item, relative to struct ipc_ns_item. */
static const struct field f_item[] = {
	{ "name", F_STR, offsetof(struct ipc_ns_item, name), IPC_NS_MAX },
	{ "isolated", F_BOOL, offsetof(struct ipc_ns_item, isolated), 0 },
	{ "resolved", F_STRN, offsetof(struct ipc_ns_item, resolved),
	    IPC_RESOLVED_MAX },
};

/* Rules a table cannot say: limits and single-bit values. */
static int
check_request_id(const struct ipc_msg *m)
{
	return m->id != 0 ? 0 : -EINVAL;
}

/* NS_LIST: a non-zero id and a limit in 1..IPC_LIST_MAX. */
static int
check_ns_list(const struct ipc_msg *m)
{
	if (m->id == 0 || m->u.ns_list.limit < 1 ||
	    m->u.ns_list.limit > IPC_LIST_MAX)
		return -EINVAL;
	return 0;
}

/* SUBSCRIBE: a non-zero id and a non-empty set of known topics. */
static int
check_subscribe(const struct ipc_msg *m)
{
	uint32_t t = m->u.subscribe.topics;

	if (m->id == 0 || t == 0 || (t & ~IPC_TOPIC_ALL) != 0)
		return -EINVAL;
	return 0;
}

/* USAGE: a non-zero id, a known view and a non-empty window. */
static int
check_usage(const struct ipc_msg *m)
{
	if (m->id == 0 || m->u.usage.view >= IPC_USAGE_VIEWS ||
	    m->u.usage.since_us >= m->u.usage.until_us)
		return -EINVAL;
	return 0;
}

/* CHANGE: exactly one known topic. */
static int
check_change(const struct ipc_msg *m)
{
	uint32_t t = m->u.change.topic;

	if (t != IPC_TOPIC_NAMESPACES && t != IPC_TOPIC_INSTANCES &&
	    t != IPC_TOPIC_OWNED)
		return -EINVAL;
	return 0;
}

#define S(n, f, rq, rp, ck)	{ n, f, NFIELDS(f), rq, rp, ck }
static const struct schema schemas[IPC_TYPE_COUNT] = {
	[IPC_HELLO]	 = S("HELLO", f_hello, false, false, NULL),
	[IPC_HELLO_OK]	 = S("HELLO_OK", f_hello, false, false, NULL),
	[IPC_ERROR]	 = S("ERROR", f_error, false, true, NULL),
	[IPC_OK]	 = S("OK", f_id, false, true, NULL),
	[IPC_PING]	 = S("PING", f_req, true, false, check_request_id),
	[IPC_PONG]	 = S("PONG", f_id, false, true, NULL),
	[IPC_NS_LOOKUP]	 = S("NS_LOOKUP", f_ns_lookup, true, false,
	    check_request_id),
	[IPC_NS_RESULT]	 = S("NS_RESULT", f_ns_result, false, true, NULL),
	[IPC_NS_LIST]	 = S("NS_LIST", f_ns_list, true, false, check_ns_list),
	[IPC_NS_LIST_RESULT] = S("NS_LIST_RESULT", f_ns_list_result, false,
	    true, NULL),
	[IPC_SUBSCRIBE]	 = S("SUBSCRIBE", f_subscribe, true, false,
	    check_subscribe),
	[IPC_SNAPSHOT_BEGIN] = S("SNAPSHOT_BEGIN", f_snapshot_begin, false,
	    true, NULL),
	[IPC_CHANGE]	 = S("CHANGE", f_change, false, false, check_change),
	[IPC_SNAPSHOT_END] = S("SNAPSHOT_END", f_snapshot_end, false, false,
	    NULL),
	[IPC_STATUS]	 = S("STATUS", f_req, true, false, check_request_id),
	[IPC_STATUS_RESULT] = S("STATUS_RESULT", f_status_result, false, true,
	    NULL),
	[IPC_FAULT_ARM]	 = S("FAULT_ARM", f_fault_arm, true, false,
	    check_request_id),
	[IPC_USAGE]	 = S("USAGE", f_usage, true, false, check_usage),
	[IPC_USAGE_RESULT] = S("USAGE_RESULT", f_usage_result, false, true,
	    NULL),
};

static const char *const role_names[IPC_ROLE_COUNT] = {
	[IPC_ROLE_SYNC] = "sync",
	[IPC_ROLE_ADMIT] = "admit",
	[IPC_ROLE_QUOTA] = "quota",
	[IPC_ROLE_CTL] = "ctl",
};

/* The schema of a type, or NULL. */
static const struct schema *
schema_of(enum ipc_type t)
{
	if ((int)t <= IPC_NONE || t >= IPC_TYPE_COUNT)
		return NULL;
	return &schemas[t];
}

/* Name of a message type for logs. */
const char *
ipc_type_name(enum ipc_type t)
{
	const struct schema *s = schema_of(t);

	return s != NULL ? s->name : "?";
}

/* Whether a type is a client request (carries id and deadline_ms). */
bool
ipc_type_is_request(enum ipc_type t)
{
	const struct schema *s = schema_of(t);

	return s != NULL && s->request;
}

/* Whether a type answers a request (carries its id). */
bool
ipc_type_is_reply(enum ipc_type t)
{
	const struct schema *s = schema_of(t);

	return s != NULL && s->reply;
}

/* Name of a role, or NULL. */
const char *
ipc_role_name(enum ipc_role r)
{
	if ((int)r <= IPC_ROLE_NONE || r >= IPC_ROLE_COUNT)
		return NULL;
	return role_names[r];
}

/* Role from its name; IPC_ROLE_NONE when unknown. */
enum ipc_role
ipc_role_parse(const char *name)
{
	for (int r = IPC_ROLE_NONE + 1; r < IPC_ROLE_COUNT; r++)
		if (strcmp(role_names[r], name) == 0)
			return (enum ipc_role)r;
	return IPC_ROLE_NONE;
}

/* ---- composite fields: NS_LIST_RESULT items ---- */

static int enc_fields(msgpack_packer *pk, const struct field *f, size_t n,
    const void *base);
static int dec_fields(const msgpack_object *o, const struct field *f,
    size_t n, void *base, const char **why);
static void clear_fields(const struct field *f, size_t n, void *base);

/* Encode the items array of an NS_LIST_RESULT. */
static int
enc_items(msgpack_packer *pk, const struct ipc_ns_list_result *r)
{
	int rc;

	if (r->nitems > IPC_LIST_MAX || (r->nitems > 0 && r->items == NULL))
		return -EINVAL;
	msgpack_pack_array(pk, r->nitems);
	for (size_t i = 0; i < r->nitems; i++)
		if ((rc = enc_fields(pk, f_item, NFIELDS(f_item),
		    &r->items[i])) < 0)
			return rc;
	return 0;
}

/* Decode the items array of an NS_LIST_RESULT (nitems counts what is set). */
static int
dec_items(const msgpack_object *o, struct ipc_ns_list_result *r,
    const char **why)
{
	int rc;

	if (o->type != MSGPACK_OBJECT_ARRAY) {
		*why = "items is not an array";
		return -EBADMSG;
	}
	if (o->via.array.size > IPC_LIST_MAX) {
		*why = "too many items";
		return -EBADMSG;
	}
	if (o->via.array.size == 0)
		return 0;
	r->items = calloc(o->via.array.size, sizeof(*r->items));
	if (r->items == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < o->via.array.size; i++) {
		r->nitems = i + 1;
		rc = dec_fields(&o->via.array.ptr[i], f_item, NFIELDS(f_item),
		    &r->items[i], why);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Free the items of an NS_LIST_RESULT. */
static void
clear_items(struct ipc_ns_list_result *r)
{
	for (size_t i = 0; i < r->nitems && r->items != NULL; i++)
		clear_fields(f_item, NFIELDS(f_item), &r->items[i]);
	free(r->items);
	r->items = NULL;
	r->nitems = 0;
}

/* ---- composite fields: USAGE_RESULT rows ---- */

/* Encode the rows array of a USAGE_RESULT. */
static int
enc_rows(msgpack_packer *pk, const struct ipc_usage_result *r)
{
	int rc;

	if (r->nrows > IPC_USAGE_ROWS_MAX || (r->nrows > 0 && r->rows == NULL))
		return -EINVAL;
	msgpack_pack_array(pk, r->nrows);
	for (size_t i = 0; i < r->nrows; i++)
		if ((rc = enc_fields(pk, f_row, NFIELDS(f_row),
		    &r->rows[i])) < 0)
			return rc;
	return 0;
}

/* Decode the rows array of a USAGE_RESULT (nrows counts what is set). */
static int
dec_rows(const msgpack_object *o, struct ipc_usage_result *r,
    const char **why)
{
	int rc;

	if (o->type != MSGPACK_OBJECT_ARRAY ||
	    o->via.array.size > IPC_USAGE_ROWS_MAX) {
		*why = "rows is not an array of at most 2000";
		return -EBADMSG;
	}
	if (o->via.array.size == 0)
		return 0;
	if ((r->rows = calloc(o->via.array.size, sizeof(*r->rows))) == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < o->via.array.size; i++) {
		r->nrows = i + 1;
		if ((rc = dec_fields(&o->via.array.ptr[i], f_row,
		    NFIELDS(f_row), &r->rows[i], why)) < 0)
			return rc;
	}
	return 0;
}

/* Free the rows of a USAGE_RESULT. */
static void
clear_rows(struct ipc_usage_result *r)
{
	for (size_t i = 0; i < r->nrows && r->rows != NULL; i++)
		clear_fields(f_row, NFIELDS(f_row), &r->rows[i]);
	free(r->rows);
	r->rows = NULL;
	r->nrows = 0;
}

/* ---- composite fields: STATUS_RESULT counts ---- */

/* Encode the counts map of a STATUS_RESULT. */
static int
enc_counts(msgpack_packer *pk, const struct ipc_status_result *r)
{
	if (r->ncounts > IPC_COUNTS_MAX || (r->ncounts > 0 && r->counts == NULL))
		return -EINVAL;
	msgpack_pack_map(pk, r->ncounts);
	for (size_t i = 0; i < r->ncounts; i++) {
		size_t len = strnlen(r->counts[i].kind, IPC_KIND_MAX + 1);

		if (len > IPC_KIND_MAX)
			return -EINVAL;
		msgpack_pack_str(pk, len);
		msgpack_pack_str_body(pk, r->counts[i].kind, len);
		msgpack_pack_uint64(pk, r->counts[i].count);
	}
	return 0;
}

/* Decode the counts map of a STATUS_RESULT: unique kinds, u64 values. */
static int
dec_counts(const msgpack_object *o, struct ipc_status_result *r,
    const char **why)
{
	const msgpack_object_map *m = &o->via.map;

	if (o->type != MSGPACK_OBJECT_MAP || m->size > IPC_COUNTS_MAX) {
		*why = "counts is not a map of at most 64 entries";
		return -EBADMSG;
	}
	if (m->size == 0)
		return 0;
	r->counts = calloc(m->size, sizeof(*r->counts));
	if (r->counts == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < m->size; i++) {
		const msgpack_object *k = &m->ptr[i].key, *v = &m->ptr[i].val;

		if (k->type != MSGPACK_OBJECT_STR || k->via.str.size == 0 ||
		    k->via.str.size > IPC_KIND_MAX ||
		    memchr(k->via.str.ptr, '\0', k->via.str.size) != NULL ||
		    v->type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
			*why = "bad counts entry";
			return -EBADMSG;
		}
		memcpy(r->counts[i].kind, k->via.str.ptr, k->via.str.size);
		r->counts[i].count = v->via.u64;
		r->ncounts = i + 1;
		for (uint32_t j = 0; j < i; j++)
			if (strcmp(r->counts[j].kind, r->counts[i].kind) == 0) {
				*why = "duplicate counts key";
				return -EBADMSG;
			}
	}
	return 0;
}

/* ---- the generic field walker ---- */

/* Encode one string field, checking its cap. */
static int
enc_str(msgpack_packer *pk, const char *s, size_t cap)
{
	size_t len = strnlen(s, cap + 1);

	if (len > cap)
		return -EINVAL;
	msgpack_pack_str(pk, len);
	msgpack_pack_str_body(pk, s, len);
	return 0;
}

/* Encode one field of base. */
static int
enc_field(msgpack_packer *pk, const struct field *f, const void *base)
{
	const char *p = (const char *)base + f->off;
	const char *s;

	switch (f->kind) {
	case F_U32:
		return msgpack_pack_uint32(pk, *(const uint32_t *)p) ? -ENOMEM : 0;
	case F_U64:
		return msgpack_pack_uint64(pk, *(const uint64_t *)p) ? -ENOMEM : 0;
	case F_BOOL:
		if (*(const bool *)p)
			return msgpack_pack_true(pk) ? -ENOMEM : 0;
		return msgpack_pack_false(pk) ? -ENOMEM : 0;
	case F_STR:
		return enc_str(pk, p, f->cap);
	case F_STRN:
		s = *(char *const *)p;
		if (s == NULL)
			return msgpack_pack_nil(pk) ? -ENOMEM : 0;
		return enc_str(pk, s, f->cap);
	case F_ROLE:
		s = ipc_role_name(*(const enum ipc_role *)p);
		if (s == NULL)
			return -EINVAL;
		return enc_str(pk, s, IPC_ROLE_MAX);
	case F_ITEMS:
		return enc_items(pk, (const struct ipc_ns_list_result *)p);
	case F_COUNTS:
		return enc_counts(pk, (const struct ipc_status_result *)p);
	case F_ROWS:
		return enc_rows(pk, (const struct ipc_usage_result *)p);
	case F_STRD:
		s = *(char *const *)p;
		return enc_str(pk, s != NULL ? s : "", f->cap);
	}
	return -EINVAL;
}

/* Encode the fields of base as a map with exactly these keys. */
static int
enc_fields(msgpack_packer *pk, const struct field *f, size_t n,
    const void *base)
{
	int rc;

	msgpack_pack_map(pk, n);
	for (size_t i = 0; i < n; i++) {
		size_t klen = strlen(f[i].key);

		msgpack_pack_str(pk, klen);
		msgpack_pack_str_body(pk, f[i].key, klen);
		if ((rc = enc_field(pk, &f[i], base)) < 0)
			return rc;
	}
	return 0;
}

/* Copy a msgpack string of at most cap bytes without NULs into a buffer. */
static int
dec_str(const msgpack_object *o, char *dst, size_t cap, const char **why)
{
	if (o->type != MSGPACK_OBJECT_STR) {
		*why = "expected a string";
		return -EBADMSG;
	}
	if (o->via.str.size > cap) {
		*why = "string too long";
		return -EBADMSG;
	}
	if (memchr(o->via.str.ptr, '\0', o->via.str.size) != NULL) {
		*why = "NUL in string";
		return -EBADMSG;
	}
	memcpy(dst, o->via.str.ptr, o->via.str.size);
	dst[o->via.str.size] = '\0';
	return 0;
}

/* Decode a string-or-nil into a new heap string. */
static int
dec_strn(const msgpack_object *o, char **dst, size_t cap, const char **why)
{
	char *s;
	int rc;

	if (o->type == MSGPACK_OBJECT_NIL)
		return 0;
	if (o->type != MSGPACK_OBJECT_STR || o->via.str.size > cap) {
		*why = o->type != MSGPACK_OBJECT_STR ? "expected string or nil"
		    : "string too long";
		return -EBADMSG;
	}
	if ((s = malloc(o->via.str.size + 1)) == NULL)
		return -ENOMEM;
	if ((rc = dec_str(o, s, cap, why)) < 0) {
		free(s);
		return rc;
	}
	*dst = s;
	return 0;
}

/* Decode one field value into base. */
static int
dec_field(const msgpack_object *o, const struct field *f, void *base,
    const char **why)
{
	char *p = (char *)base + f->off;
	char role[IPC_ROLE_MAX + 1];
	int rc;

	switch (f->kind) {
	case F_U32:
	case F_U64:
		if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
		    (f->kind == F_U32 && o->via.u64 > UINT32_MAX)) {
			*why = "expected an unsigned integer in range";
			return -EBADMSG;
		}
		if (f->kind == F_U32)
			*(uint32_t *)p = (uint32_t)o->via.u64;
		else
			*(uint64_t *)p = o->via.u64;
		return 0;
	case F_BOOL:
		if (o->type != MSGPACK_OBJECT_BOOLEAN) {
			*why = "expected a boolean";
			return -EBADMSG;
		}
		*(bool *)p = o->via.boolean;
		return 0;
	case F_STR:
		return dec_str(o, p, f->cap, why);
	case F_STRN:
		return dec_strn(o, (char **)p, f->cap, why);
	case F_ROLE:
		if ((rc = dec_str(o, role, IPC_ROLE_MAX, why)) < 0)
			return rc;
		if ((*(enum ipc_role *)p = ipc_role_parse(role)) ==
		    IPC_ROLE_NONE) {
			*why = "unknown role";
			return -EBADMSG;
		}
		return 0;
	case F_ITEMS:
		return dec_items(o, (struct ipc_ns_list_result *)p, why);
	case F_COUNTS:
		return dec_counts(o, (struct ipc_status_result *)p, why);
	case F_ROWS:
		return dec_rows(o, (struct ipc_usage_result *)p, why);
	case F_STRD:
		if (o->type != MSGPACK_OBJECT_STR) {
			*why = "expected a string";
			return -EBADMSG;
		}
		return dec_strn(o, (char **)p, f->cap, why);
	}
	return -EBADMSG;
}

/* Decode a map that must have exactly the keys of the table, once each. */
static int
dec_fields(const msgpack_object *o, const struct field *f, size_t n,
    void *base, const char **why)
{
	uint32_t seen = 0;
	int rc;

	if (o->type != MSGPACK_OBJECT_MAP) {
		*why = "body is not a map";
		return -EBADMSG;
	}
	if (o->via.map.size != n) {
		*why = "wrong number of keys";
		return -EBADMSG;
	}
	for (uint32_t i = 0; i < o->via.map.size; i++) {
		const msgpack_object *k = &o->via.map.ptr[i].key;
		size_t j;

		if (k->type != MSGPACK_OBJECT_STR) {
			*why = "key is not a string";
			return -EBADMSG;
		}
		for (j = 0; j < n; j++)
			if (strlen(f[j].key) == k->via.str.size &&
			    memcmp(f[j].key, k->via.str.ptr,
			    k->via.str.size) == 0)
				break;
		if (j == n || (seen & (1u << j)) != 0) {
			*why = j == n ? "unknown key" : "duplicate key";
			return -EBADMSG;
		}
		seen |= 1u << j;
		if ((rc = dec_field(&o->via.map.ptr[i].val, &f[j], base,
		    why)) < 0)
			return rc;
	}
	return 0;
}

/* Free the heap parts of the fields of base. */
static void
clear_fields(const struct field *f, size_t n, void *base)
{
	for (size_t i = 0; i < n; i++) {
		char *p = (char *)base + f[i].off;

		if (f[i].kind == F_STRN || f[i].kind == F_STRD) {
			free(*(char **)p);
			*(char **)p = NULL;
		} else if (f[i].kind == F_ROWS) {
			clear_rows((struct ipc_usage_result *)p);
		} else if (f[i].kind == F_ITEMS) {
			clear_items((struct ipc_ns_list_result *)p);
		} else if (f[i].kind == F_COUNTS) {
			struct ipc_status_result *r = (void *)p;

			free(r->counts);
			r->counts = NULL;
			r->ncounts = 0;
		}
	}
}

/* ---- the raw-bytes scanner ---- */

/* Read a big-endian unsigned of n bytes. */
static uint64_t
be(const uint8_t *p, size_t n)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n; i++)
		v = (v << 8) | p[i];
	return v;
}

/*
 * Size of the header and fixed payload of the value at p: sets *hdr (bytes
 * of type and length), *body (payload bytes) and *nchild (nested values).
 */
static int
mp_head(const uint8_t *p, size_t len, size_t *hdr, uint64_t *body,
    uint64_t *nchild)
{
	static const uint8_t fixsz[] = { 1, 2, 4, 8, 16 };
	uint8_t c = p[0];
	size_t lb = 0;

	*hdr = 1; *body = 0; *nchild = 0;
	if (c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3)
		return 0;
	if (c >= 0x80 && c <= 0x8f) { *nchild = 2u * (c & 0x0f); return 0; }
	if (c >= 0x90 && c <= 0x9f) { *nchild = c & 0x0f; return 0; }
	if (c >= 0xa0 && c <= 0xbf) { *body = c & 0x1f; return 0; }
	switch (c) {
	case 0xc4: case 0xd9: lb = 1; break;
	case 0xc5: case 0xda: case 0xdc: case 0xde: lb = 2; break;
	case 0xc6: case 0xdb: case 0xdd: case 0xdf: lb = 4; break;
	case 0xc7: lb = 1; *body = 1; break;
	case 0xc8: lb = 2; *body = 1; break;
	case 0xc9: lb = 4; *body = 1; break;
	case 0xca: *body = 4; return 0;
	case 0xcb: *body = 8; return 0;
	case 0xcc: case 0xd0: *body = 1; return 0;
	case 0xcd: case 0xd1: *body = 2; return 0;
	case 0xce: case 0xd2: *body = 4; return 0;
	case 0xcf: case 0xd3: *body = 8; return 0;
	case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8:
		*body = 1u + fixsz[c - 0xd4];
		return 0;
	default:
		return -EBADMSG;	/* 0xc1 */
	}
	if (len < 1 + lb)
		return -EBADMSG;
	*hdr = 1 + lb;
	if (c == 0xdc || c == 0xdd)
		*nchild = be(p + 1, lb);
	else if (c == 0xde || c == 0xdf)
		*nchild = 2 * be(p + 1, lb);
	else
		*body += be(p + 1, lb);
	return 0;
}

/*
 * Check the one value at p[*off..len): well-formed, nested at most depth
 * deep, and no declared length larger than the bytes left. Advances *off.
 */
static int
mp_scan(const uint8_t *p, size_t len, size_t *off, int depth)
{
	size_t hdr;
	uint64_t body, nchild;

	if (*off >= len || depth > MP_MAX_DEPTH)
		return -EBADMSG;
	if (mp_head(p + *off, len - *off, &hdr, &body, &nchild) < 0)
		return -EBADMSG;
	*off += hdr;
	if (body > len - *off || nchild > len - *off)
		return -EBADMSG;
	*off += body;
	for (uint64_t i = 0; i < nchild; i++)
		if (mp_scan(p, len, off, depth + 1) < 0)
			return -EBADMSG;
	return 0;
}

/* ---- messages ---- */

struct encbuf {
	msgpack_sbuffer	 sb;
	bool		 oom;
};

/* msgpack write callback that remembers an allocation failure. */
static int
encbuf_write(void *data, const char *buf, size_t len)
{
	struct encbuf *eb = data;

	if (msgpack_sbuffer_write(&eb->sb, buf, len) != 0) {
		eb->oom = true;
		return -1;
	}
	return 0;
}

/* Encode a message as a whole frame: length header, then [type, body]. */
int
ipc_msg_encode(const struct ipc_msg *msg, size_t max_frame, uint8_t **ret_buf,
    size_t *ret_len)
{
	const struct schema *s = schema_of(msg->type);
	struct encbuf eb;
	msgpack_sbuffer *sb = &eb.sb;
	msgpack_packer pk;
	size_t blen;
	int rc;

	if (s == NULL || (s->check != NULL && s->check(msg) < 0))
		return -EINVAL;
	if (max_frame == 0 || max_frame > IPC_FRAME_MAX)
		max_frame = IPC_FRAME_MAX;
	msgpack_sbuffer_init(sb);
	eb.oom = false;
	msgpack_packer_init(&pk, &eb, encbuf_write);
	encbuf_write(&eb, "\0\0\0\0", IPC_FRAME_HDR);
	msgpack_pack_array(&pk, 2);
	msgpack_pack_uint32(&pk, (uint32_t)msg->type);
	rc = enc_fields(&pk, s->fields, s->nfields, msg);
	if (rc == 0 && (eb.oom || sb->data == NULL))
		rc = -ENOMEM;
	if (rc < 0)
		goto fail;
	blen = sb->size - IPC_FRAME_HDR;
	if (blen > max_frame) {
		rc = -EMSGSIZE;
		goto fail;
	}
	sb->data[0] = (char)(blen >> 24);
	sb->data[1] = (char)(blen >> 16);
	sb->data[2] = (char)(blen >> 8);
	sb->data[3] = (char)blen;
	*ret_len = sb->size;
	*ret_buf = (uint8_t *)msgpack_sbuffer_release(sb);
	return 0;
fail:
	msgpack_sbuffer_destroy(sb);
	return rc;
}

/* Decode the unpacked [type, body] value into tmp. */
static int
decode_object(const msgpack_object *o, struct ipc_msg *tmp, const char **why)
{
	const struct schema *s;
	uint64_t t;
	int rc;

	if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != 2) {
		*why = "not a [type, body] array";
		return -EBADMSG;
	}
	if (o->via.array.ptr[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
		*why = "type is not an unsigned integer";
		return -EBADMSG;
	}
	t = o->via.array.ptr[0].via.u64;
	if (t == IPC_NONE || t >= IPC_TYPE_COUNT) {
		*why = "unknown message type";
		return -EPROTONOSUPPORT;
	}
	tmp->type = (enum ipc_type)t;
	s = schema_of(tmp->type);
	if ((rc = dec_fields(&o->via.array.ptr[1], s->fields, s->nfields, tmp,
	    why)) < 0) {
		if (rc == -ENOMEM)
			*why = "out of memory";
		return rc;
	}
	if (s->check != NULL && s->check(tmp) < 0) {
		*why = "value out of range";
		return -EBADMSG;
	}
	return 0;
}

/* Decode one frame body; exactly one value, exactly the schema. */
int
ipc_msg_decode(const uint8_t *body, size_t len, struct ipc_msg *ret,
    const char **ret_why)
{
	struct ipc_msg tmp;
	msgpack_unpacked up;
	const char *why = "malformed";
	size_t off = 0;
	int rc;

	memset(&tmp, 0, sizeof(tmp));
	if ((rc = mp_scan(body, len, &off, 0)) < 0 || off != len) {
		why = rc < 0 ? "not msgpack" : "bytes after the value";
		if (ret_why != NULL)
			*ret_why = why;
		return -EBADMSG;
	}
	msgpack_unpacked_init(&up);
	off = 0;
	if (msgpack_unpack_next(&up, (const char *)body, len, &off) !=
	    MSGPACK_UNPACK_SUCCESS || off != len) {
		why = "not msgpack";
		rc = -EBADMSG;
	} else
		rc = decode_object(&up.data, &tmp, &why);
	msgpack_unpacked_destroy(&up);
	if (rc < 0) {
		ipc_msg_clear(&tmp);
		if (ret_why != NULL)
			*ret_why = why;
		return rc;
	}
	*ret = tmp;
	return 0;
}

/* Free the decoded heap parts of a message. */
void
ipc_msg_clear(struct ipc_msg *msg)
{
	const struct schema *s;

	if (msg == NULL)
		return;
	if ((s = schema_of(msg->type)) != NULL)
		clear_fields(s->fields, s->nfields, msg);
	memset(msg, 0, sizeof(*msg));
}

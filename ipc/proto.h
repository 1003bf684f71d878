/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kpgpud IPC protocol: every message type and its schema.
 *
 * Transport: a stream Unix socket. Each frame is a 4-byte big-endian length
 * (1..IPC_FRAME_MAX) followed by exactly one msgpack value:
 *
 *	[type, body]
 *
 * type is a positive integer (enum ipc_type), body a map with string keys.
 * The key set of every body is exact: a decoder rejects missing keys, extra
 * keys, duplicate keys, wrong types, strings and arrays over their cap, and
 * any byte after the value. Integers are unsigned unless noted.
 *
 * The first frame from the client is HELLO; the server answers HELLO_OK or
 * ERROR (id 0) and closes. Requests carry a client-chosen non-zero id and a
 * deadline_ms (relative budget, 0 = none) so that the server can bound its
 * own work; every reply carries the id of its request. Pushes (CHANGE,
 * SNAPSHOT_END) carry no id.
 *
 * Schemas ("?" = may be nil; caps in brackets):
 *
 *  HELLO          {"version": u, "role": str[16]}
 *                 role is "sync" | "admit" | "quota" | "ctl"
 *  HELLO_OK       {"version": u, "role": str[16]}        (the server's role)
 *  ERROR          {"id": u, "code": u, "message": str[256]}
 *                 code is a positive errno value (ETIMEDOUT, ENOENT, EPERM,
 *                 EPROTO, EINVAL, ENOTSUP, EBUSY, ...); id 0 = connection
 *  OK             {"id": u}
 *  PING           {"id": u, "deadline_ms": u}
 *  PONG           {"id": u}
 *  NS_LOOKUP      {"id": u, "deadline_ms": u, "namespace": str[63]}
 *  NS_RESULT      {"id": u, "found": bool, "isolated": bool,
 *                  "resolved": str[8192]?, "generation": u64,
 *                  "from_api": bool}
 *  NS_LIST        {"id": u, "deadline_ms": u, "prefix": str[63],
 *                  "limit": u[1..100], "after": str[63]}
 *  NS_LIST_RESULT {"id": u, "items": [{"name": str[63], "isolated": bool,
 *                  "resolved": str[8192]?}][100], "more": bool}
 *  SUBSCRIBE      {"id": u, "deadline_ms": u, "topics": u (IPC_TOPIC_*),
 *                  "since_generation": u64}
 *  SNAPSHOT_BEGIN {"id": u, "generation": u64, "full": bool}
 *                 the reply to SUBSCRIBE; CHANGE pushes follow, then
 *                 SNAPSHOT_END, then live CHANGE pushes. full = the snapshot
 *                 replaces what the subscriber knew (since_generation was 0
 *                 or too old); otherwise only changes after since_generation
 *                 are sent, deletions included.
 *  CHANGE         {"generation": u64, "topic": u (one IPC_TOPIC_*),
 *                  "kind": str[63], "namespace": str[63], "name": str[253],
 *                  "deleted": bool, "isolated": bool, "resolved": str[8192]?}
 *                 kind is "Namespace", the instance kind (e.g. "Agent") or
 *                 the owned kind ("ResourceClaimTemplate", ...); for a
 *                 Namespace, namespace == name and isolated/resolved are
 *                 set; otherwise isolated is false and resolved nil.
 *  SNAPSHOT_END   {"generation": u64}
 *  STATUS         {"id": u, "deadline_ms": u}
 *  STATUS_RESULT  {"id": u, "synced": bool, "generation": u64,
 *                  "counts": {str[63]: u64}[64]}
 *  USAGE          {"id": u, "deadline_ms": u, "view": u (IPC_USAGE_*),
 *                  "since_us": u64, "until_us": u64, "offset": u}
 *                 the usage ledger (ctl role only): sums over
 *                 [since_us, until_us) by tenant, claim, pod or device, or
 *                 one status row per tenant; rows from offset on.
 *  USAGE_RESULT   {"id": u, "rows": [{"namespace": str[63],
 *                  "instance": str[320], "key": str[253],
 *                  "device_class": str[253], "profile": str[31],
 *                  "device_ms": u64, "gpu_ms": u64, "intervals": u64,
 *                  "bounded": u64, "open": u64,
 *                  "detail": str[4096]}][2000],
 *                  "more": bool, "lost": u64, "now_us": u64}
 *                 a page ends at 2000 rows or about 768 KiB of them (more
 *                 says whether rows follow); detail is "" except in the
 *                 status view (a JSON object);
 *                 lost counts closed intervals a rebuilt cache lost.
 *  FAULT_ARM      {"id": u, "deadline_ms": u, "spec": str[512]}
 *                 answered OK or ERROR; only test builds (KPGPUD_FAULTS)
 *                 accept it.
 *
 * Pure: encode and decode only, no I/O, no logging.
 */
#ifndef KPGPUD_IPC_PROTO_H
#define KPGPUD_IPC_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IPC_PROTO_VERSION	1
#define IPC_FRAME_HDR		4
#define IPC_FRAME_MAX		(1024 * 1024)	/* hard cap; configurable down */

#define IPC_ROLE_MAX		16
#define IPC_MESSAGE_MAX		256	/* ERROR.message */
#define IPC_NS_MAX		63	/* a namespace is a DNS-1123 label */
#define IPC_NAME_MAX		253	/* an object name */
#define IPC_KIND_MAX		63
#define IPC_RESOLVED_MAX	8192	/* the resolved annotation JSON */
#define IPC_LIST_MAX		100	/* NS_LIST limit and items */
#define IPC_COUNTS_MAX		64	/* STATUS_RESULT.counts entries */
#define IPC_SPEC_MAX		512	/* FAULT_ARM.spec */
#define IPC_USAGE_ROWS_MAX	2000	/* USAGE_RESULT.rows */
#define IPC_USAGE_PAGE_BYTES	(768 * 1024)	/* a page's rows, about */
#define IPC_INSTANCE_MAX	320	/* "Kind/name" */
#define IPC_PROFILE_MAX		31
#define IPC_DETAIL_MAX		4096

enum ipc_type {
	IPC_NONE = 0,
	IPC_HELLO = 1,
	IPC_HELLO_OK,
	IPC_ERROR,
	IPC_OK,
	IPC_PING,
	IPC_PONG,
	IPC_NS_LOOKUP,
	IPC_NS_RESULT,
	IPC_NS_LIST,
	IPC_NS_LIST_RESULT,
	IPC_SUBSCRIBE,
	IPC_SNAPSHOT_BEGIN,
	IPC_CHANGE,
	IPC_SNAPSHOT_END,
	IPC_STATUS,
	IPC_STATUS_RESULT,
	IPC_FAULT_ARM,
	IPC_USAGE,
	IPC_USAGE_RESULT,
	IPC_TYPE_COUNT
};

/* Bit for a type in an allowlist mask. */
#define IPC_BIT(t)		(1u << (t))

enum ipc_role {
	IPC_ROLE_NONE = 0,
	IPC_ROLE_SYNC,
	IPC_ROLE_ADMIT,
	IPC_ROLE_QUOTA,
	IPC_ROLE_CTL,
	IPC_ROLE_COUNT
};

/* SUBSCRIBE.topics bits and CHANGE.topic values. */
#define IPC_TOPIC_NAMESPACES	0x1u
#define IPC_TOPIC_INSTANCES	0x2u
#define IPC_TOPIC_OWNED		0x4u
#define IPC_TOPIC_ALL		0x7u

struct ipc_hello {		/* HELLO, HELLO_OK */
	uint32_t	 version;
	enum ipc_role	 role;
};

struct ipc_error {		/* ERROR */
	uint32_t	 code;		/* positive errno */
	char		 message[IPC_MESSAGE_MAX + 1];
};

struct ipc_ns_lookup {		/* NS_LOOKUP */
	char		 ns[IPC_NS_MAX + 1];
};

struct ipc_ns_result {		/* NS_RESULT */
	bool		 found;
	bool		 isolated;
	char		*resolved;	/* NULL = nil */
	uint64_t	 generation;
	bool		 from_api;
};

struct ipc_ns_list {		/* NS_LIST */
	char		 prefix[IPC_NS_MAX + 1];
	uint32_t	 limit;		/* 1..IPC_LIST_MAX */
	char		 after[IPC_NS_MAX + 1];	/* "" = from the start */
};

struct ipc_ns_item {
	char		 name[IPC_NS_MAX + 1];
	bool		 isolated;
	char		*resolved;	/* NULL = nil */
};

struct ipc_ns_list_result {	/* NS_LIST_RESULT */
	struct ipc_ns_item *items;
	size_t		 nitems;	/* <= IPC_LIST_MAX */
	bool		 more;
};

struct ipc_subscribe {		/* SUBSCRIBE */
	uint32_t	 topics;
	uint64_t	 since_generation;
};

struct ipc_snapshot {		/* SNAPSHOT_BEGIN, SNAPSHOT_END */
	uint64_t	 generation;
	bool		 full;		/* SNAPSHOT_BEGIN only */
};

struct ipc_change {		/* CHANGE */
	uint64_t	 generation;
	uint32_t	 topic;
	char		 kind[IPC_KIND_MAX + 1];
	char		 ns[IPC_NS_MAX + 1];
	char		 name[IPC_NAME_MAX + 1];
	bool		 deleted;
	bool		 isolated;
	char		*resolved;	/* NULL = nil */
};

struct ipc_count {
	char		 kind[IPC_KIND_MAX + 1];
	uint64_t	 count;
};

struct ipc_status_result {	/* STATUS_RESULT */
	bool		 synced;
	uint64_t	 generation;
	struct ipc_count *counts;
	size_t		 ncounts;	/* <= IPC_COUNTS_MAX */
};

/* USAGE.view */
enum ipc_usage_view {
	IPC_USAGE_TENANT = 0,
	IPC_USAGE_CLAIM,
	IPC_USAGE_POD,
	IPC_USAGE_DEVICE,
	IPC_USAGE_STATUS,
	IPC_USAGE_VIEWS
};

struct ipc_usage {		/* USAGE */
	uint32_t	 view;
	uint64_t	 since_us;
	uint64_t	 until_us;
	uint32_t	 offset;
};

struct ipc_usage_row {
	char		 ns[IPC_NS_MAX + 1];
	char		 instance[IPC_INSTANCE_MAX + 1];
	char		 key[IPC_NAME_MAX + 1];
	char		 device_class[IPC_NAME_MAX + 1];
	char		 profile[IPC_PROFILE_MAX + 1];
	uint64_t	 device_ms;
	uint64_t	 gpu_ms;
	uint64_t	 intervals;
	uint64_t	 bounded;
	uint64_t	 open;
	char		*detail;	/* NULL = "" */
};

struct ipc_usage_result {	/* USAGE_RESULT */
	struct ipc_usage_row *rows;
	size_t		 nrows;		/* <= IPC_USAGE_ROWS_MAX */
	bool		 more;
	uint64_t	 lost;
	uint64_t	 now_us;
};

struct ipc_fault_arm {		/* FAULT_ARM */
	char		 spec[IPC_SPEC_MAX + 1];
};

/*
 * One message. id and deadline_ms are used by the types whose schema has
 * them and ignored (encoded as nothing) by the others. Pointer fields are
 * owned by whoever filled them: the encoder only reads them, and
 * ipc_msg_clear() frees them for messages filled by ipc_msg_decode().
 */
struct ipc_msg {
	enum ipc_type	 type;
	uint32_t	 id;
	uint32_t	 deadline_ms;
	union {
		struct ipc_hello		 hello;
		struct ipc_error		 error;
		struct ipc_ns_lookup		 ns_lookup;
		struct ipc_ns_result		 ns_result;
		struct ipc_ns_list		 ns_list;
		struct ipc_ns_list_result	 ns_list_result;
		struct ipc_subscribe		 subscribe;
		struct ipc_snapshot		 snapshot;
		struct ipc_change		 change;
		struct ipc_status_result	 status_result;
		struct ipc_fault_arm		 fault_arm;
		struct ipc_usage		 usage;
		struct ipc_usage_result		 usage_result;
	} u;
};

/*
 * Encode msg as one complete frame (length header included) into a new
 * buffer the caller frees. -EINVAL for a message that breaks its own schema
 * (unknown type, string over its cap, bad role), -EMSGSIZE when the frame
 * would exceed max_frame, -ENOMEM.
 */
int	 ipc_msg_encode(const struct ipc_msg *msg, size_t max_frame,
	    uint8_t **ret_buf, size_t *ret_len);

/*
 * Decode one frame body (the msgpack value, without the length header).
 * Returns 0, or -EBADMSG (not exactly one well-formed value, wrong shape,
 * wrong types, extra/missing keys, caps exceeded), -EPROTONOSUPPORT for an
 * unknown message type, -ENOMEM. ret is untouched on failure; on success
 * release it with ipc_msg_clear(). If ret_why is not NULL it is set to a
 * short static reason on failure.
 */
int	 ipc_msg_decode(const uint8_t *body, size_t len, struct ipc_msg *ret,
	    const char **ret_why);

/* Free what ipc_msg_decode() allocated in msg; leaves msg zeroed. */
void	 ipc_msg_clear(struct ipc_msg *msg);

/* Name of a type ("NS_LOOKUP"), or "?" for an unknown one. */
const char *ipc_type_name(enum ipc_type t);
/* Whether t is a request a client sends (it carries id and deadline_ms). */
bool	 ipc_type_is_request(enum ipc_type t);
/* Whether t is a reply to a request (it carries id). */
bool	 ipc_type_is_reply(enum ipc_type t);

/* Role name ("admit"), or NULL for an invalid role. */
const char *ipc_role_name(enum ipc_role r);
/* Parse a role name; IPC_ROLE_NONE if unknown. */
enum ipc_role ipc_role_parse(const char *name);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The IPC transport: framing over stream Unix sockets, peer credential
 * checks, a libevent server, a libevent client and a small blocking client.
 * Message schemas are in ipc/proto.h.
 *
 * Server side: the server accepts a connection, checks the peer's uid
 * (SO_PEERCRED) against the socket's allowlist, waits for HELLO (bounded),
 * then dispatches each request through a table of handlers indexed by type.
 * Every request whose type is not on the socket's allowlist, every frame that
 * does not decode and every protocol violation closes that peer only, with
 * one log line naming its pid and uid and the reason.
 *
 * A handler gets a struct ipc_req it answers now or later with
 * ipc_req_reply() / ipc_req_error(); exactly one of them must be called for
 * every request (it frees the request). If the peer goes away first the
 * request stays valid, ipc_req_alive() turns false, the optional cancel
 * callback runs, and the eventual answer is dropped.
 *
 * PING is answered by the server itself; so is FAULT_ARM in test builds
 * (KPGPUD_FAULTS) when no handler is registered for it.
 */
#ifndef KPGPUD_IPC_H
#define KPGPUD_IPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ipc/proto.h"

struct event_base;
struct evbuffer;

#define IPC_UIDS_MAX		16

/* ---- framing (frame.c) ---- */

/*
 * Take one whole frame from in if it holds one and decode it. Returns 1 with
 * *ret filled (release with ipc_msg_clear), 0 if more bytes are needed,
 * -EMSGSIZE for a length over max_frame or zero, or a decode error from
 * ipc_msg_decode() (the bad frame is consumed). ret_why as for decode.
 */
int	 ipc_frame_read(struct evbuffer *in, size_t max_frame,
	    struct ipc_msg *ret, const char **ret_why);

/* Encode msg and append the frame to out; errors as ipc_msg_encode(). */
int	 ipc_frame_write(struct evbuffer *out, const struct ipc_msg *msg,
	    size_t max_frame);

/* ---- peer credentials (peer.c) ---- */

struct ipc_cred {
	pid_t	 pid;
	uid_t	 uid;
	gid_t	 gid;
};

/* The credentials of the process at the other end of a Unix socket. */
int	 ipc_peer_cred(int fd, struct ipc_cred *ret);

/*
 * Whether uid is in the allowlist. An empty list allows only the calling
 * process's own effective uid.
 */
bool	 ipc_uid_allowed(const uid_t *uids, size_t nuids, uid_t uid);
/* (uid lists are parsed by common/util.h parse_uid_list) */

/* ---- server (server.c) ---- */

struct ipc_server;
struct ipc_conn;
struct ipc_req;

struct ipc_server_config {
	const char	*path;		/* socket path (for binding and logs) */
	int		 listen_fd;	/* >= 0: a passed fd (LISTEN_FDS) */
	enum ipc_role	 role;		/* ours, sent in HELLO_OK */
	uid_t		 uids[IPC_UIDS_MAX];	/* peer allowlist */
	size_t		 nuids;		/* 0 = our own euid only */
	uint32_t	 allowed_roles;	/* bits (1u << role); 0 = any */
	uint32_t	 allowed_types;	/* IPC_BIT(type) of requests */
	/*
	 * Roles bound to peer uids by configuration: when any list is set, a
	 * peer may take in HELLO only a role whose list holds its uid (a uid
	 * on several lists may take any of those roles).
	 */
	uid_t		 role_uids[IPC_ROLE_COUNT][IPC_UIDS_MAX];
	size_t		 nrole_uids[IPC_ROLE_COUNT];
	/* Request types a role may send, within allowed_types; 0 = all. */
	uint32_t	 role_types[IPC_ROLE_COUNT];
	size_t		 max_frame;	/* 0 = IPC_FRAME_MAX */
	size_t		 max_outbuf;	/* 0 = 4 MiB; a peer beyond is dropped */
	unsigned	 max_conns;	/* 0 = 64 */
	unsigned	 max_pending;	/* unanswered requests per peer; 0 = 256 */
	unsigned	 hello_timeout_ms;	/* 0 = 5000 */
	/* a peer connection ended (after its HELLO); may be NULL */
	void		(*on_close)(struct ipc_conn *conn, void *arg);
	void		*arg;
};

/* A request handler: answer req now or later, exactly once. */
typedef void	(*ipc_handler_fn)(struct ipc_req *req, const struct ipc_msg *msg,
		    void *arg);

/*
 * Create a server on base: bind path (mode 0660, a stale socket unlinked)
 * or adopt cfg->listen_fd, and listen. The config is copied.
 */
int	 ipc_server_new(struct event_base *base,
	    const struct ipc_server_config *cfg, struct ipc_server **ret);
/* Close every peer and the listener; unlinks the path if we bound it. */
void	 ipc_server_free(struct ipc_server *srv);
/* Register the handler for a request type (overrides the built-ins). */
int	 ipc_server_handle(struct ipc_server *srv, enum ipc_type type,
	    ipc_handler_fn fn, void *arg);
/* Number of connected peers. */
unsigned ipc_server_nconns(const struct ipc_server *srv);

/* Monotonic deadline in ms (CLOCK_MONOTONIC), or 0 when the peer set none. */
uint64_t ipc_req_deadline(const struct ipc_req *req);
/* Milliseconds left before the deadline (0 if past), or UINT32_MAX. */
uint32_t ipc_req_remaining_ms(const struct ipc_req *req);
/* Whether the requesting peer is still connected. */
bool	 ipc_req_alive(const struct ipc_req *req);
/*
 * The peer's connection, or NULL once it has gone. Take it before answering
 * (e.g. to stream CHANGE pushes after SNAPSHOT_BEGIN): answering frees req.
 */
struct ipc_conn *ipc_req_conn(const struct ipc_req *req);
/*
 * Called once, from the event loop, if the peer disconnects (or the server
 * is freed) before the request is answered; req is still valid there and
 * may be answered (freed) inside the callback.
 */
void	 ipc_req_on_cancel(struct ipc_req *req,
	    void (*fn)(struct ipc_req *req, void *arg), void *arg);
/*
 * Answer req with msg (its id is set from req) and free req. Returns 0, or
 * -ENOTCONN if the peer is gone, or an encode / send error (the peer is then
 * dropped). req is freed in every case.
 */
int	 ipc_req_reply(struct ipc_req *req, struct ipc_msg *msg);
/* Answer req with ERROR {code, printf message} and free req. */
int	 ipc_req_error(struct ipc_req *req, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Send a push (CHANGE, SNAPSHOT_END, ...) to a peer. -ENOTCONN if it is
 * closing; -ENOBUFS if its output buffer is over the cap (the peer is then
 * dropped, asynchronously: conn stays valid until on_close runs).
 */
int	 ipc_conn_send(struct ipc_conn *conn, const struct ipc_msg *msg);
/* Drop a peer (asynchronously; on_close follows) with a logged reason. */
void	 ipc_conn_close(struct ipc_conn *conn, const char *reason);
/* Per-connection user data for the daemon (e.g. its subscription). */
void	 ipc_conn_set_data(struct ipc_conn *conn, void *data);
void	*ipc_conn_data(const struct ipc_conn *conn);
/* The peer's credentials and the role it announced. */
const struct ipc_cred *ipc_conn_cred(const struct ipc_conn *conn);
enum ipc_role ipc_conn_role(const struct ipc_conn *conn);
/* Bytes queued for the peer. */
size_t	 ipc_conn_outbuf(const struct ipc_conn *conn);

/* ---- client on libevent (client.c) ---- */

struct ipc_client;

struct ipc_client_config {
	const char	*path;
	enum ipc_role	 role;		/* ours, sent in HELLO */
	uid_t		 server_uids[IPC_UIDS_MAX];	/* expected server */
	size_t		 nserver_uids;	/* 0 = no check */
	size_t		 max_frame;	/* 0 = IPC_FRAME_MAX */
	size_t		 max_outbuf;	/* 0 = 4 MiB */
	unsigned	 max_pending;	/* 0 = 1024 */
	unsigned	 backoff_min_ms;	/* 0 = 100 */
	unsigned	 backoff_max_ms;	/* 0 = 5000 */
	unsigned	 hello_timeout_ms;	/* 0 = 5000 */
	/* the server said HELLO_OK */
	void		(*on_connected)(struct ipc_client *c, void *arg);
	/* the connection is gone (err < 0); pending requests already failed */
	void		(*on_disconnected)(struct ipc_client *c, int err,
			    void *arg);
	/* a frame that answers no request (CHANGE, SNAPSHOT_END) */
	void		(*on_push)(struct ipc_client *c, const struct ipc_msg *m,
			    void *arg);
	void		*arg;
};

/*
 * The answer to one request: err 0 with reply (which may be an ERROR
 * message: then err is -reply->u.error.code), -ETIMEDOUT when the deadline
 * passed, -ECONNRESET when the connection was lost, -ECANCELED when the
 * client was freed. reply is NULL unless a frame arrived; it is valid only
 * during the call.
 */
typedef void	(*ipc_reply_fn)(struct ipc_client *c, int err,
		    const struct ipc_msg *reply, void *arg);

/* Create a client; it connects (and reconnects) once started. */
int	 ipc_client_new(struct event_base *base,
	    const struct ipc_client_config *cfg, struct ipc_client **ret);
/* Start connecting now. */
int	 ipc_client_start(struct ipc_client *c);
/* Disconnect; pending requests get -ECANCELED. NULL ok. */
void	 ipc_client_free(struct ipc_client *c);
/* Whether HELLO_OK has been received on the current connection. */
bool	 ipc_client_connected(const struct ipc_client *c);
/* Number of requests waiting for an answer. */
unsigned ipc_client_npending(const struct ipc_client *c);
/*
 * Send req (type and body; the id is assigned and deadline_ms set from
 * timeout_ms) and call cb with the answer, or with -ETIMEDOUT after
 * timeout_ms (required, > 0). Returns 0 with the id in *ret_id (may be
 * NULL), or -ENOTCONN (not connected), -EBUSY (too many pending), an
 * encode error. cb is never called when this fails.
 */
int	 ipc_client_request(struct ipc_client *c, struct ipc_msg *req,
	    unsigned timeout_ms, ipc_reply_fn cb, void *arg,
	    uint32_t *ret_id);
/* Forget a pending request: its callback will not be called. */
int	 ipc_client_cancel(struct ipc_client *c, uint32_t id);
/*
 * Drop the connection (pending requests get -ECONNRESET, on_disconnected
 * runs) and reconnect after the backoff. Nothing happens when not connected.
 */
void	 ipc_client_reset(struct ipc_client *c);

/* ---- kpgpud-sync's change stream on libevent (sub.c) ---- */

/*
 * A subscriber: connects, says HELLO, sends SUBSCRIBE for its topics since
 * the last generation it holds, takes the snapshot and then live changes;
 * after a failed SUBSCRIBE on a live connection it subscribes again (with
 * jittered backoff), after a lost connection it reconnects and resumes.
 * One log line per state change ("<name> connected", "subscribed to
 * <name>", "<name> snapshot received", "<name> subscription failed",
 * "<name> disconnected"). Other requests may share its connection through
 * ipc_sub_client(). Not to be freed from inside its own callbacks.
 */
struct ipc_sub;

enum ipc_sub_state {
	IPC_SUB_DOWN,		/* not connected */
	IPC_SUB_SUBSCRIBING,	/* SUBSCRIBE sent */
	IPC_SUB_SNAPSHOT,	/* SNAPSHOT_BEGIN received */
	IPC_SUB_LIVE,		/* SNAPSHOT_END received: live changes */
	IPC_SUB_RETRY,		/* SUBSCRIBE failed; sent again soon */
};

struct ipc_sub_config {
	/* path, role, server uids, backoff; the callbacks are the sub's */
	struct ipc_client_config client;
	uint32_t	 topics;	/* IPC_TOPIC_* bits */
	const char	*name;		/* the server in logs; NULL = "sync" */
	unsigned	 timeout_ms;	/* SUBSCRIBE's answer; 0 = 10000 */
	/* HELLO_OK, before SUBSCRIBE goes out */
	void		(*on_connected)(struct ipc_sub *s, void *arg);
	/* SNAPSHOT_BEGIN: full = the snapshot replaces what is known */
	void		(*on_begin)(struct ipc_sub *s, bool full,
			    uint64_t generation, void *arg);
	/* a CHANGE, in the snapshot or live */
	void		(*on_change)(struct ipc_sub *s,
			    const struct ipc_change *ch, void *arg);
	/* SNAPSHOT_END: live changes follow */
	void		(*on_end)(struct ipc_sub *s, uint64_t generation,
			    void *arg);
	/* the link is gone; mid_snapshot: SNAPSHOT_END never came */
	void		(*on_disconnected)(struct ipc_sub *s, int err,
			    bool mid_snapshot, void *arg);
	void		*arg;
};

/* Create a subscriber on base (not yet connecting). 0 or -errno. */
int	 ipc_sub_new(struct event_base *base, const struct ipc_sub_config *cfg,
	    struct ipc_sub **ret);
/* Start connecting. */
int	 ipc_sub_start(struct ipc_sub *s);
/* Disconnect and free. NULL ok. */
void	 ipc_sub_free(struct ipc_sub *s);
/* The client under the subscription (for other requests on its link). */
struct ipc_client *ipc_sub_client(const struct ipc_sub *s);
/* Where the subscription stands, and that state's name. */
enum ipc_sub_state ipc_sub_state(const struct ipc_sub *s);
const char *ipc_sub_state_name(enum ipc_sub_state st);
/* The generation a new SUBSCRIBE starts after (0: a full snapshot). */
uint64_t ipc_sub_generation(const struct ipc_sub *s);

/* ---- blocking client for kpgpuctl and tests (call.c) ---- */

struct ipc_call;

/*
 * Connect to path, say HELLO as role and wait for HELLO_OK, all within
 * timeout_ms. server_uids (nuids > 0) is the expected server's uid list.
 * -ECONNREFUSED/-ENOENT..., -ETIMEDOUT, -EPERM (server uid, or refused with
 * ERROR), -EBADMSG (bad answer).
 */
int	 ipc_call_open(const char *path, enum ipc_role role,
	    const uid_t *server_uids, size_t nuids, unsigned timeout_ms,
	    struct ipc_call **ret);
void	 ipc_call_close(struct ipc_call *s);
/* Send req (id assigned, deadline set) and wait for its reply (ERROR too). */
int	 ipc_call_request(struct ipc_call *s, struct ipc_msg *req,
	    unsigned timeout_ms, struct ipc_msg *ret);
/* Wait for the next frame of any kind (e.g. a CHANGE push). */
int	 ipc_call_recv(struct ipc_call *s, unsigned timeout_ms,
	    struct ipc_msg *ret);
/* Send a frame without waiting. */
int	 ipc_call_send(struct ipc_call *s, const struct ipc_msg *msg);
/* The connected fd (for poll). */
int	 ipc_call_fd(const struct ipc_call *s);

/*
 * One request, one reply: connect, HELLO, call, close, all within
 * timeout_ms. 0 with *ret filled (an ERROR reply included; release with
 * ipc_msg_clear), or -errno as for ipc_call_open / -ETIMEDOUT.
 */
int	 ipc_call(const char *path, enum ipc_role role, struct ipc_msg *req,
	    unsigned timeout_ms, struct ipc_msg *ret);

#endif

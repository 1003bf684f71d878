/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Peer credentials: who is at the other end of a Unix socket, and whether
 * that uid is on a socket's allowlist.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ipc/ipc.h"

/* SO_PEERCRED of a connected Unix socket. */
int
ipc_peer_cred(int fd, struct ipc_cred *ret)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
		return -errno;
	if (len != sizeof(uc))
		return -EPROTO;
	ret->pid = uc.pid;
	ret->uid = uc.uid;
	ret->gid = uc.gid;
	return 0;
}

/* Whether uid may talk to us; an empty list means our own euid only. */
bool
ipc_uid_allowed(const uid_t *uids, size_t nuids, uid_t uid)
{
	if (nuids == 0)
		return uid == geteuid();
	for (size_t i = 0; i < nuids; i++)
		if (uids[i] == uid)
			return true;
	return false;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Arms fault points in a running daemon over its IPC socket (test builds
 * only): sends one FAULT_ARM as a kpgpuctl-role peer and prints "ok" or the
 * ERROR reply. Used by scripts/faults to make sync's cache writes fail.
 *
 *   ipc_faultarm SOCK SPEC		e.g. "sync.commit=error:EROFS"
 *
 * Exit 0 when the daemon accepted the spec, 1 otherwise.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ipc/ipc.h"

/* Send one FAULT_ARM and report the answer. */
int
main(int argc, char **argv)
{
	struct ipc_msg req, rep;
	int r;

	if (argc != 3) {
		fprintf(stderr, "usage: ipc_faultarm SOCK SPEC\n");
		return 2;
	}
	if (strlen(argv[2]) > IPC_SPEC_MAX) {
		fprintf(stderr, "ipc_faultarm: spec too long\n");
		return 2;
	}
	memset(&req, 0, sizeof(req));
	memset(&rep, 0, sizeof(rep));
	req.type = IPC_FAULT_ARM;
	snprintf(req.u.fault_arm.spec, sizeof(req.u.fault_arm.spec), "%s",
	    argv[2]);
	if ((r = ipc_call(argv[1], IPC_ROLE_CTL, &req, 5000, &rep)) < 0) {
		fprintf(stderr, "ipc_faultarm: %s: %s\n", argv[1], strerror(-r));
		return 1;
	}
	if (rep.type != IPC_OK) {
		fprintf(stderr, "ipc_faultarm: refused: %s\n",
		    rep.type == IPC_ERROR ? rep.u.error.message : "bad reply");
		ipc_msg_clear(&rep);
		return 1;
	}
	ipc_msg_clear(&rep);
	printf("ok\n");
	return 0;
}

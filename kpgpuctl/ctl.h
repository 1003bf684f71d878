/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kpgpuctl subcommands. Each lives in its own file beside the module whose
 * code it reuses, and returns the process exit status: 0 success, 1 runtime
 * failure, 2 usage or invalid input.
 */
#ifndef KPGPUCTL_CTL_H
#define KPGPUCTL_CTL_H

int	ctl_cmd_patch(int argc, char **argv);	/* cmd_admit.c */
int	ctl_cmd_review(int argc, char **argv);	/* cmd_admit.c */
int	ctl_cmd_render(int argc, char **argv);	/* cmd_render.c */
int	ctl_cmd_cache(int argc, char **argv);	/* cmd_cache.c */
int	ctl_cmd_usage(int argc, char **argv);	/* cmd_usage.c */
int	ctl_cmd_status(int argc, char **argv);	/* cmd_usage.c */

/*
 * sync.sock: the --socket flag, else $KPGPUD_SYNC_SOCKET, else
 * $KPGPUD_RUNTIME_DIR/sync.sock, else /run/kpgpud/sync.sock (cmd_cache.c).
 */
const char *ctl_sync_socket(const char *flag);

#endif

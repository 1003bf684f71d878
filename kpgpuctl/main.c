/* SPDX-License-Identifier: Apache-2.0 */
/* kpgpuctl: the operator's CLI; dispatches to one subcommand per word. */
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "kpgpuctl/ctl.h"

struct ctl_cmd {
	const char	*name;
	int		(*fn)(int, char **);
	const char	*usage;
};

static const struct ctl_cmd ctl_cmds[] = {
	{ "render", ctl_cmd_render,
	    "render [--owner-refs] [--strict] [--strict-classes LIST] "
	    "[--quota-name T]\n\t[--class-prefix P] [--gpu-class C] "
	    "[--tenant-namespace name|namespace]\n\t[--driver-gates LIST] "
	    "< instance.json\n"
	    "\tprint the objects kpgpud-quota would compose for an instance" },
	{ "patch", ctl_cmd_patch,
	    "patch --resolved JSON < pod.json\n"
	    "\tprint the RFC 6902 patch kpgpud-admit would return for a pod" },
	{ "review", ctl_cmd_review,
	    "review --resolved JSON | --open | --miss allow|deny\n"
	    "\t| --unresolved allow|deny < review.json\n"
	    "\tprint the AdmissionReview response for a review" },
	{ "cache", ctl_cmd_cache,
	    "cache [--sync-socket PATH] [--timeout MS] list [--prefix P] | "
	    "get NAMESPACE | status\n\t| watch [--since GEN] [--count N]\n"
	    "\tquery kpgpud-sync's cache over sync.sock" },
	{ "usage", ctl_cmd_usage,
	    "usage [--sync-socket PATH] [--since T] [--until T] "
	    "[--by tenant|claim|pod|device]\n\t[--format table|csv|json]\n"
	    "\tdevice-seconds and GPU-equivalent seconds per tenant "
	    "(sync's usage ledger)" },
	{ "status", ctl_cmd_status,
	    "status [--sync-socket PATH]\n\tone line per tenant: mode, profile, "
	    "maxDevices, devices held, Pods pending on quota, last result" },
};

/* Print the top-level usage. */
static void
usage(FILE *f)
{
	fprintf(f, "usage: kpgpuctl COMMAND [ARGS...]\n\ncommands:\n");
	for (size_t i = 0; i < nitems(ctl_cmds); i++)
		fprintf(f, "  %s\n", ctl_cmds[i].usage);
	fprintf(f, "\n  --help, --version\n\nSee kpgpuctl(1).\n");
}

int
main(int argc, char **argv)
{
	log_init("kpgpuctl", false);
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("kpgpuctl %s\n", KPGPUD_VERSION);
		return 0;
	}
	for (size_t i = 0; i < nitems(ctl_cmds); i++)
		if (strcmp(argv[1], ctl_cmds[i].name) == 0)
			return ctl_cmds[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "kpgpuctl: unknown command \"%s\"\n", argv[1]);
	usage(stderr);
	return 2;
}

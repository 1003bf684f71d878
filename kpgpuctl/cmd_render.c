/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kpgpuctl render: read an instance object on stdin and print the plan
 * kpgpud-quota would carry out for it (kpgpud-quota/plan.c), so an operator
 * can see the objects, quota keys and Namespace metadata before labelling.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/opts.h"
#include "common/util.h"
#include "kpgpuctl/ctl.h"
#include "kpgpud-quota/plan.h"

#define RENDER_INPUT_MAX	(1024 * 1024)

/* Print the subcommand's usage. */
static void
render_usage(FILE *f)
{
	fprintf(f, "usage: kpgpuctl render [--owner-refs] [--strict] "
	    "[--strict-classes LIST]\n"
	    "\t[--quota-name TEMPLATE] [--class-prefix PREFIX] "
	    "[--gpu-class CLASS]\n"
	    "\t[--tenant-namespace name|namespace] [--driver-gates LIST] "
	    "< instance.json\n"
	    "\t(--owner-ref, --namespace-from: old names of --owner-refs,\n"
	    "\t--tenant-namespace)\n");
}

/* Read all of stdin, up to RENDER_INPUT_MAX bytes. */
static int
read_stdin(char **ret_buf, size_t *ret_len)
{
	size_t len = 0, n;
	char *buf;

	if ((buf = malloc(RENDER_INPUT_MAX + 1)) == NULL)
		return -ENOMEM;
	while ((n = fread(buf + len, 1, RENDER_INPUT_MAX + 1 - len,
	    stdin)) > 0) {
		len += n;
		if (len > RENDER_INPUT_MAX) {
			free(buf);
			return -EFBIG;
		}
	}
	if (ferror(stdin)) {
		free(buf);
		return -EIO;
	}
	buf[len] = '\0';
	*ret_buf = buf;
	*ret_len = len;
	return 0;
}

/* Parse the options into cfg; -1 on a usage error, 1 for --help. */
static int
render_opts(int argc, char **argv, struct plan_config *cfg)
{
	static const struct opts_long opts[] = {
		{ "owner-refs", 'o' },
		{ "owner-ref", 'o' },	/* deprecated */
		{ "strict", 's' },
		{ "strict-classes=", 'S' },
		{ "quota-name=", 'q' },
		{ "class-prefix=", 'p' },
		{ "gpu-class=", 'g' },
		{ "tenant-namespace=", 'n' },
		/* deprecated: the name before kpgpud-quota's was used here */
		{ "namespace-from=", 'n' },
		{ "driver-gates=", 'G' },
		{ "help", 'h' },
	};
	struct opts o;
	char err[256];
	int c;

	opts_init(&o, argc, argv, "h", opts, nitems(opts));
	while ((c = opts_next(&o)) != OPTS_END) {
		switch (c) {
		case 'o': cfg->owner_refs = true; break;
		case 's': cfg->strict = true; break;
		case 'S': cfg->strict_classes = o.arg; break;
		case 'q': cfg->quota_name = o.arg; break;
		case 'p': cfg->class_prefix = o.arg; break;
		case 'g': cfg->gpu_class = o.arg; break;
		case 'n':
			if (strcmp(o.arg, "namespace") == 0)
				cfg->ns_from_namespace = true;
			else if (strcmp(o.arg, "name") != 0)
				return -1;
			break;
		case 'G':
			if (plan_gates_parse(o.arg, &cfg->driver_gates, err,
			    sizeof(err)) < 0) {
				fprintf(stderr, "kpgpuctl render: "
				    "--driver-gates: %s\n", err);
				return -1;
			}
			break;
		case 'h': return 1;
		default:
			fprintf(stderr, "%s\n", o.err);	/* OPTS_ERR */
			return -1;
		}
	}
	return o.ind == argc ? 0 : -1;
}

/* Build and print the plan; the exit status follows ctl.h. */
int
ctl_cmd_render(int argc, char **argv)
{
	struct plan_config cfg = { 0 };
	struct plan_instance *in = NULL;
	struct plan *p = NULL;
	char err[512], *buf = NULL, *out = NULL;
	size_t len;
	json_t *j = NULL;
	int r, rc = 1;

	if ((r = render_opts(argc, argv, &cfg)) != 0) {
		render_usage(r > 0 ? stdout : stderr);
		return r > 0 ? 0 : 2;
	}
	if ((r = read_stdin(&buf, &len)) < 0) {
		fprintf(stderr, "kpgpuctl render: reading stdin: %s\n",
		    strerror(-r));
		return r == -EFBIG ? 2 : 1;
	}
	if ((in = calloc(1, sizeof(*in))) == NULL)
		goto fail;
	err[0] = '\0';
	if ((r = plan_instance_parse(buf, len, in, err, sizeof(err))) == 0)
		r = plan_build(in, &cfg, &p, err, sizeof(err));
	if (r == -EINVAL || r == PLAN_EGATE || r == PLAN_ENEVER) {
		if (r != -EINVAL)
			fprintf(stderr, "kpgpuctl render: %s: ",
			    plan_refusal_reason(r));
		else
			fprintf(stderr, "kpgpuctl render: ");
		fprintf(stderr, "%s\n", err);
		rc = 2;
		goto fail;
	}
	if (r < 0 || (j = plan_to_json(p)) == NULL ||
	    (out = json_dumps(j, JSON_INDENT(2))) == NULL) {
		fprintf(stderr, "kpgpuctl render: %s\n", strerror(r < 0 ? -r :
		    ENOMEM));
		goto fail;
	}
	printf("%s\n", out);
	rc = fflush(stdout) == 0 ? 0 : 1;
fail:
	free(out);
	json_decref(j);
	plan_free(p);
	free(in);
	free(buf);
	return rc;
}

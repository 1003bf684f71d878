/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one argv walker. Every command line goes through it: the daemons'
 * (config.c builds a table from its struct config_opt) and those of
 * kpgpuctl's subcommands and the test tools (a compact table, opts_init).
 *
 * It knows --name VALUE, --name=VALUE (an empty VALUE included), flags,
 * --no-NAME for a negatable flag, short options (-x, -xVALUE, -x VALUE)
 * and "--", after which every word is an operand. A value that must come
 * is taken from the next word whatever it looks like ("--name --flag"
 * gives --name the value "--flag").
 *
 * Two sets of rules, chosen by OPTS_GETOPT:
 *   0            the daemons': exact long names only, no clusters, the
 *                first operand ends the options; messages like
 *                "unknown option --x", "--name needs a value".
 *   OPTS_GETOPT  what getopt_long(3) gave kpgpuctl and the tools: unique
 *                prefixes of long names (and prefixes shared only by
 *                aliases of one option), clusters of short flags (-ab),
 *                operands anywhere (moved behind the options, in order)
 *                and getopt_long's messages, after argv[0].
 *
 * The walker does not print: a bad option returns OPTS_ERR with the reason
 * in err, for the caller to print or wrap.
 */
#ifndef KPGPUD_OPTS_H
#define KPGPUD_OPTS_H

#include <stdbool.h>
#include <stddef.h>

#define OPTS_MAX	24	/* entries in one compact table */
#define OPTS_NAME_MAX	32	/* bytes of one compact name, with its '=' */
#define OPTS_ERR_MAX	1024	/* bytes of a message, with its NUL */

#define OPTS_END	(-1)	/* opts_next: no more options */
#define OPTS_ERR	(-2)	/* opts_next: a bad option; see err */

#define OPTS_GETOPT	0x01	/* getopt_long's rules (above) */

/* Whether and how an option takes a value. */
enum opts_arg {
	OPTS_FLAG = 0,	/* none: --name, -x */
	OPTS_VALUE,	/* --name VALUE, --name=VALUE, -x VALUE, -xVALUE */
	OPTS_EQ,	/* a flag that also takes --name=VALUE, never a word */
};

/* One option of a walker's table. */
struct opts_opt {
	const char	*name;		/* long name without "--"; NULL: none */
	char		 short_name;	/* 0: none */
	enum opts_arg	 arg;
	bool		 negatable;	/* --no-NAME too (exact name only) */
	int		 code;		/* >= 0: what opts_next returns */
};

/*
 * A compact table entry for opts_init: { "name", code } is a flag,
 * { "name=", code } takes a value.
 */
struct opts_long {
	const char	*name;
	int		 code;
};

/* One walk over argv; the public members are read after opts_next. */
struct opts {
	int		 ind;	/* after OPTS_END: the first operand */
	char		*arg;	/* the option's value; NULL: none given */
	bool		 negated;	/* it was given as --no-NAME */
	char		 err[OPTS_ERR_MAX];	/* after OPTS_ERR: why */

	/* the walker's own */
	int			 argc;
	char			**argv;
	const struct opts_opt	*tab;
	size_t			 n;
	unsigned int		 flags;
	int			 nops;	/* operands passed over, from ind */
	char			*cluster;	/* rest of a -abc word */
	bool			 done;
	bool			 bad_table;
	struct opts_opt		 own[2 * OPTS_MAX];	/* opts_init's table */
	char			 names[OPTS_MAX][OPTS_NAME_MAX];
};

/*
 * Start walking argv (argv[0] is the program) with the n options of tab,
 * which must outlive the walk. OPTS_GETOPT may reorder argv.
 */
void	opts_start(struct opts *w, int argc, char **argv,
	    const struct opts_opt *tab, size_t n, unsigned int flags);

/*
 * Start walking argv with getopt_long's rules, the n entries of tab as the
 * long options and shortopts ("hx:": -h, -x VALUE) as the short ones. A
 * table of more than OPTS_MAX entries, a shortopts of more than OPTS_MAX
 * bytes or a name of OPTS_NAME_MAX bytes or more makes opts_next fail.
 */
void	opts_init(struct opts *w, int argc, char **argv, const char *shortopts,
	    const struct opts_long *tab, size_t n);

/*
 * The next option: its code (value in arg), OPTS_ERR (reason in err) or
 * OPTS_END, which it goes on returning; ind is then the first operand.
 */
int	opts_next(struct opts *w);

#endif

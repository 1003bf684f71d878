/*
 * Long options for getopt_long(3) from a compact table, for the commands
 * that parse their own arguments (kpgpuctl's subcommands, the test tools;
 * the daemons use config.h): { "name", code } is a flag, { "name=", code }
 * takes a value (--name VALUE or --name=VALUE). getopt_long does the rest
 * as usual: optind, optarg, unambiguous abbreviations, its messages.
 */
#ifndef KPGPUD_OPTS_H
#define KPGPUD_OPTS_H

#include <getopt.h>	/* optind, optarg */
#include <stddef.h>

#define OPTS_MAX	24	/* entries in one table */
#define OPTS_NAME_MAX	32	/* bytes of one name, with its '=' */

struct opts_long {
	const char	*name;	/* "name" or "name=" */
	int		 code;	/* what opts_next() returns for it */
};

/*
 * The next option of argv as getopt_long(argc, argv, shortopts, ...)
 * returns it with the n entries of tab as its long options: a code, '?'
 * for a bad one, -1 at the end. Set optind = 1 before the first call.
 */
int	opts_next(int argc, char **argv, const char *shortopts,
	    const struct opts_long *tab, size_t n);

#endif

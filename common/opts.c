/* Long options for getopt_long(3) from a compact table (see opts.h). */
#include <getopt.h>
#include <string.h>

#include "common/opts.h"

int
opts_next(int argc, char **argv, const char *shortopts,
    const struct opts_long *tab, size_t n)
{
	struct option lo[OPTS_MAX + 1];
	char names[OPTS_MAX][OPTS_NAME_MAX];
	size_t len;

	if (n > OPTS_MAX)
		return '?';
	for (size_t i = 0; i < n; i++) {
		len = strlen(tab[i].name);
		if (len >= OPTS_NAME_MAX)
			return '?';
		memcpy(names[i], tab[i].name, len + 1);
		lo[i].has_arg = no_argument;
		if (len > 0 && names[i][len - 1] == '=') {
			names[i][len - 1] = '\0';
			lo[i].has_arg = required_argument;
		}
		lo[i].name = names[i];
		lo[i].flag = NULL;
		lo[i].val = tab[i].code;
	}
	memset(&lo[n], 0, sizeof(lo[n]));
	return getopt_long(argc, argv, shortopts, lo, NULL);
}

/*
 * common/opts.c: a compact table gives getopt_long what the long-option
 * array would: flags, values after a space or '=', aliases, unambiguous
 * abbreviations, '?' for an unknown or ambiguous option and a missing
 * value, short options beside, and a table too large or a name too long
 * refused.
 */
#include <stdio.h>
#include <string.h>

#include "common/opts.h"
#include "common/util.h"
#include "tests/unit/test.h"

static const struct opts_long tab[] = {
	{ "flag", 'f' },
	{ "value=", 'v' },
	{ "value-alias=", 'v' },
	{ "verbose", 'V' },
};

/* The codes (and values) opts_next gives for args, as one string. */
static const char *
run(const char **args)
{
	static char out[256];
	char *argv[16];
	int argc = 0, c;
	size_t off = 0;

	argv[argc++] = (char *)"prog";
	while (*args != NULL && argc < 15)
		argv[argc++] = (char *)*args++;
	argv[argc] = NULL;
	out[0] = '\0';
	optind = 1;
	opterr = 0;
	while ((c = opts_next(argc, argv, "h", tab, nitems(tab))) != -1 &&
	    off < sizeof(out))
		off += (size_t)snprintf(out + off, sizeof(out) - off, "%c%s%s ",
		    c, c == 'v' ? "=" : "", c == 'v' ? optarg : "");
	if (off < sizeof(out))
		snprintf(out + off, sizeof(out) - off, "| %d", argc - optind);
	return out;
}

TEST(flags_values_and_aliases)
{
	const char *a1[] = { "--flag", "--value", "x", "--value-alias=y",
	    "-h", NULL };
	const char *a2[] = { "--flag", "rest", "--verbose", NULL };
	const char *a3[] = { "--val=z", "--fl", "--verb", "--", "--flag",
	    NULL };

	CHECK_STR(run(a1), "f v=x v=y h | 0");
	/* getopt_long moves the operand to the end */
	CHECK_STR(run(a2), "f V | 1");
	/* unambiguous abbreviations; "--" ends the options */
	CHECK_STR(run(a3), "v=z f V | 1");
}

TEST(bad_options)
{
	const char *unknown[] = { "--nope", NULL };
	const char *missing[] = { "--value", NULL };
	const char *ambiguous[] = { "--v=1", NULL };
	const char *noarg[] = { "--flag=1", NULL };

	CHECK_STR(run(unknown), "? | 0");
	CHECK_STR(run(missing), "? | 0");
	CHECK_STR(run(ambiguous), "? | 0");
	CHECK_STR(run(noarg), "? | 0");
}

TEST(table_limits)
{
	static struct opts_long big[OPTS_MAX + 1];
	static const struct opts_long longname[] = {
		{ "a-name-of-thirty-two-bytes-xxxxx", 'x' },
	};
	char *argv[] = { (char *)"prog", (char *)"--a", NULL };

	for (size_t i = 0; i < nitems(big); i++) {
		big[i].name = "a";
		big[i].code = 'a';
	}
	optind = 1;
	opterr = 0;
	CHECK_INT(opts_next(2, argv, "", big, OPTS_MAX), 'a');
	optind = 1;
	CHECK_INT(opts_next(2, argv, "", big, OPTS_MAX + 1), '?');
	optind = 1;
	CHECK_INT(opts_next(2, argv, "", longname, 1), '?');
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * common/opts.c, the one argv walker, under both sets of rules. With a
 * compact table (kpgpuctl, the tools): flags, values after a space or '=',
 * an empty value, aliases, unambiguous abbreviations, operands moved
 * behind the options, short clusters, "--", and getopt_long's messages
 * for an unknown, ambiguous or valueless option; a table too large or a
 * name too long refused. With the daemons' rules (config.c's table):
 * exact names only, --no-NAME, flags that take only "=VALUE", the first
 * operand ending the options, and config's messages.
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

/* The daemons' kind of table: a value, a negatable flag, shorts. */
static const struct opts_opt strict_tab[] = {
	{ "workers", 'w', OPTS_VALUE, false, 1 },
	{ "debug", 'd', OPTS_EQ, true, 2 },
	{ "name", 0, OPTS_VALUE, false, 3 },
	{ "check", 0, OPTS_FLAG, false, 4 },
};

static char *targv[16];
static int targc;

/* Set targv to "prog" and args. */
static void
set_args(const char **args)
{
	targc = 0;
	targv[targc++] = (char *)"prog";
	while (*args != NULL && targc < 15)
		targv[targc++] = (char *)*args++;
	targv[targc] = NULL;
}

/*
 * Walk w to its end or first error, as one string: each code with its
 * value, then "| N" operands left, or "! message".
 */
static const char *
walk(struct opts *w)
{
	static char out[2048];
	size_t off = 0;
	int c;

	out[0] = '\0';
	while ((c = opts_next(w)) >= 0 && off < sizeof(out))
		off += (size_t)snprintf(out + off, sizeof(out) - off,
		    c < ' ' ? "%d%s%s%s " : "%c%s%s%s ", c,
		    w->negated ? "!" : "", w->arg != NULL ? "=" : "",
		    w->arg != NULL ? w->arg : "");
	if (off >= sizeof(out))
		return out;
	if (c == OPTS_ERR)
		snprintf(out + off, sizeof(out) - off, "! %s", w->err);
	else
		snprintf(out + off, sizeof(out) - off, "| %d", targc - w->ind);
	return out;
}

/* The compact table's walk over args (shortopts "hx:"). */
static const char *
run(const char **args)
{
	static struct opts w;

	set_args(args);
	opts_init(&w, targc, targv, "hx:", tab, nitems(tab));
	return walk(&w);
}

/* The daemons' rules' walk over args. */
static const char *
run_strict(const char **args)
{
	static struct opts w;

	set_args(args);
	opts_start(&w, targc, targv, strict_tab, nitems(strict_tab), 0);
	return walk(&w);
}

TEST(flags_values_and_aliases)
{
	const char *a1[] = { "--flag", "--value", "x", "--value-alias=y",
	    "-h", NULL };
	const char *a2[] = { "--flag", "rest", "--verbose", NULL };
	const char *a3[] = { "--val=z", "--fl", "--verb", "--", "--flag",
	    NULL };
	const char *a4[] = { "--value=", "--value", "--flag", "--value", "-",
	    NULL };
	const char *a5[] = { "-hx1", "-x", "-h", "-hh", NULL };

	CHECK_STR(run(a1), "f v=x v=y h | 0");
	/* the operand moves behind the options, as getopt_long moved it */
	CHECK_STR(run(a2), "f V | 1");
	CHECK_STR(targv[3], "rest");
	/* unambiguous abbreviations; "--" ends the options */
	CHECK_STR(run(a3), "v=z f V | 1");
	CHECK_STR(targv[5], "--flag");
	/* an empty value; a needed value is the next word, whatever it is */
	CHECK_STR(run(a4), "v= v=--flag v=- | 0");
	/* short clusters, a value in the rest of the word or the next */
	CHECK_STR(run(a5), "h x=1 x=-h h h | 0");
}

TEST(operands_keep_their_order)
{
	const char *a[] = { "a", "--flag", "b", "--value", "v", "c", "--",
	    "--verbose", NULL };
	const char *want[] = { "prog", "--flag", "--value", "v", "--", "a",
	    "b", "c", "--verbose" };

	CHECK_STR(run(a), "f v=v | 4");
	for (size_t i = 0; i < nitems(want); i++)
		CHECK_STR(targv[i], want[i]);
}

TEST(bad_options)
{
	const char *unknown[] = { "--nope=1", NULL };
	const char *missing[] = { "--value", NULL };
	const char *ambiguous[] = { "--v=1", NULL };
	const char *all[] = { "--=1", NULL };
	const char *noarg[] = { "--fl=", NULL };
	const char *badshort[] = { "-hq", NULL };
	const char *shortmissing[] = { "-x", NULL };

	CHECK_STR(run(unknown), "! prog: unrecognized option '--nope=1'");
	CHECK_STR(run(missing), "! prog: option '--value' requires an "
	    "argument");
	/* aliases of one option do not make a prefix ambiguous */
	CHECK_STR(run(ambiguous), "! prog: option '--v=1' is ambiguous; "
	    "possibilities: '--value' '--verbose'");
	CHECK_STR(run(all), "! prog: option '--=1' is ambiguous; "
	    "possibilities: '--flag' '--value' '--value-alias' '--verbose'");
	CHECK_STR(run(noarg), "! prog: option '--flag' doesn't allow an "
	    "argument");
	CHECK_STR(run(badshort), "h ! prog: invalid option -- 'q'");
	CHECK_STR(run(shortmissing), "! prog: option requires an argument "
	    "-- 'x'");
}

TEST(end_is_sticky)
{
	const char *a[] = { "--", "--flag", NULL };
	struct opts w;

	set_args(a);
	opts_init(&w, targc, targv, "", tab, nitems(tab));
	CHECK_INT(opts_next(&w), OPTS_END);
	CHECK_INT(opts_next(&w), OPTS_END);
	CHECK_INT(w.ind, 2);
	opts_init(&w, 0, NULL, "", tab, nitems(tab));
	CHECK_INT(opts_next(&w), OPTS_END);
}

TEST(table_limits)
{
	static struct opts_long big[OPTS_MAX + 1];
	static const struct opts_long longname[] = {
		{ "a-name-of-thirty-two-bytes-xxxxx", 'x' },
	};
	char *argv[] = { (char *)"prog", (char *)"--a", NULL };
	struct opts w;

	for (size_t i = 0; i < nitems(big); i++) {
		big[i].name = "a";
		big[i].code = 'a';
	}
	opts_init(&w, 2, argv, "", big, OPTS_MAX);
	CHECK_INT(opts_next(&w), 'a');
	opts_init(&w, 2, argv, "", big, OPTS_MAX + 1);
	CHECK_INT(opts_next(&w), OPTS_ERR);
	CHECK_STR(w.err, "prog: bad option table");
	opts_init(&w, 2, argv, "", longname, 1);
	CHECK_INT(opts_next(&w), OPTS_ERR);
	opts_init(&w, 2, argv, "abcdefghijklmnopqrstuvwxy", tab, 1);
	CHECK_INT(opts_next(&w), OPTS_ERR);
}

TEST(strict_forms)
{
	const char *a1[] = { "--workers", "3", "--workers=", "-w4", "-w",
	    "--name", "--debug", "--debug=off", "--no-debug", "-d", NULL };
	const char *a2[] = { "--check", "--debug", "stray", "--check", NULL };
	const char *a3[] = { "--", "--check", NULL };

	CHECK_STR(run_strict(a1), "1=3 1= 1=4 1=--name 2 2=off 2! 2 | 0");
	/* the first operand ends the options; nothing moves */
	CHECK_STR(run_strict(a2), "4 2 | 2");
	CHECK_STR(targv[3], "stray");
	CHECK_STR(run_strict(a3), "| 1");
	CHECK_STR(targv[2], "--check");
}

TEST(strict_errors)
{
	const struct {
		const char	*arg, *want;
	} cases[] = {
		/* no abbreviations */
		{ "--work=3", "! unknown option --work" },
		{ "--bogus", "! unknown option --bogus" },
		{ "--no-debug=1", "! unknown option --no-debug" },
		{ "--no-name", "! unknown option --no-name" },
		{ "--no-check", "! unknown option --no-check" },
		{ "--workers", "! --workers needs a value" },
		{ "--check=", "! --check takes no value" },
		{ "-x", "! unknown option -x" },
		{ "-w", "! -w needs a value" },
		{ "-dd", "! -d takes no value" },
		{ "--=1", "! unknown option --" },
		/* an unknown name is quoted back up to 64 bytes */
		{ "--aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		    "aaaaaaaaaaaaa", "! unknown option --aaaaaaaaaaaaaaaaaaaaa"
		    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" },
	};

	for (size_t i = 0; i < nitems(cases); i++) {
		const char *a[] = { cases[i].arg, NULL };

		CHECK_CASE(strcmp(run_strict(a), cases[i].want) == 0,
		    cases[i].arg);
	}
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one argv walker (see opts.h). Operands passed over under OPTS_GETOPT
 * stay in a run at argv[ind..ind+nops); each option word taken is moved in
 * front of that run, so at the end the operands follow the options in
 * their first order, as getopt_long leaves them.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/opts.h"

#define OPTS_SHOW_MAX	64	/* bytes of an unknown name quoted back */

/* Start a walk over argv with tab. */
void
opts_start(struct opts *w, int argc, char **argv, const struct opts_opt *tab,
    size_t n, unsigned int flags)
{
	w->ind = 1;
	w->arg = NULL;
	w->negated = false;
	w->err[0] = '\0';
	w->argc = argc;
	w->argv = argv;
	w->tab = tab;
	w->n = n;
	w->flags = flags;
	w->nops = 0;
	w->cluster = NULL;
	w->done = argc < 1;
	w->bad_table = false;
}

/* Start a walk with getopt_long's rules from a compact table. */
void
opts_init(struct opts *w, int argc, char **argv, const char *shortopts,
    const struct opts_long *tab, size_t n)
{
	struct opts_opt *o = w->own;
	size_t len;

	opts_start(w, argc, argv, w->own, 0, OPTS_GETOPT);
	if (n > OPTS_MAX || strlen(shortopts) > OPTS_MAX) {
		w->bad_table = true;
		return;
	}
	for (size_t i = 0; i < n; i++, o++) {
		len = strlen(tab[i].name);
		if (len >= OPTS_NAME_MAX) {
			w->bad_table = true;
			return;
		}
		memcpy(w->names[i], tab[i].name, len + 1);
		*o = (struct opts_opt){ w->names[i], 0, OPTS_FLAG, false,
		    tab[i].code };
		if (len > 0 && w->names[i][len - 1] == '=') {
			w->names[i][len - 1] = '\0';
			o->arg = OPTS_VALUE;
		}
	}
	for (const char *s = shortopts; *s != '\0'; s++) {
		if (*s == ':')
			continue;
		*o++ = (struct opts_opt){ NULL, *s, s[1] == ':' ? OPTS_VALUE :
		    OPTS_FLAG, false, (unsigned char)*s };
	}
	w->n = (size_t)(o - w->own);
}

/* Set err from a format; returns OPTS_ERR. */
static int __attribute__((format(printf, 2, 3)))
opts_fail(struct opts *w, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(w->err, sizeof(w->err), fmt, ap);
	va_end(ap);
	return OPTS_ERR;
}

/* The program name getopt_long's messages begin with. */
static const char *
opts_prog(const struct opts *w)
{
	return w->argc > 0 && w->argv[0] != NULL ? w->argv[0] : "";
}

/* Move the next k words in front of the operands passed over. */
static void
opts_take(struct opts *w, int k)
{
	while (k-- > 0) {
		char *word = w->argv[w->ind + w->nops];

		memmove(&w->argv[w->ind + 1], &w->argv[w->ind],
		    (size_t)w->nops * sizeof(*w->argv));
		w->argv[w->ind++] = word;
	}
}

/* Whether a and b are one option under two names, for abbreviations. */
static bool
opts_same(const struct opts_opt *a, const struct opts_opt *b)
{
	return a->code == b->code && a->arg == b->arg;
}

/* Whether option o's long name begins with the n bytes of name. */
static bool
opts_prefix(const struct opts_opt *o, const char *name, size_t n)
{
	return o->name != NULL && strncmp(o->name, name, n) == 0;
}

/* Whether option o's long name is the n bytes of name. */
static bool
opts_exact(const struct opts_opt *o, const char *name, size_t n)
{
	return opts_prefix(o, name, n) && o->name[n] == '\0';
}

/*
 * Index of the long option called name (n bytes): exactly, as --no-NAME
 * (without a value) or, under OPTS_GETOPT, abbreviated; -1 unknown, -2
 * ambiguous.
 */
static int
opts_find_long(struct opts *w, const char *name, size_t n, bool eq)
{
	int found = -1;

	for (size_t i = 0; i < w->n; i++)
		if (opts_exact(&w->tab[i], name, n))
			return (int)i;
	for (size_t i = 0; !eq && n > 3 && strncmp(name, "no-", 3) == 0 &&
	    i < w->n; i++)
		if (w->tab[i].negatable &&
		    opts_exact(&w->tab[i], name + 3, n - 3)) {
			w->negated = true;
			return (int)i;
		}
	if (!(w->flags & OPTS_GETOPT))
		return -1;
	for (size_t i = 0; i < w->n; i++) {
		if (!opts_prefix(&w->tab[i], name, n))
			continue;
		if (found < 0)
			found = (int)i;
		else if (!opts_same(&w->tab[found], &w->tab[i]))
			return -2;
	}
	return found;
}

/* The message for an ambiguous abbreviation, naming what it could be. */
static int
opts_ambiguous(struct opts *w, const char *word, const char *name, size_t n)
{
	const struct opts_opt *first = NULL;
	size_t len;

	len = (size_t)snprintf(w->err, sizeof(w->err), "%s: option '%s' is "
	    "ambiguous; possibilities:", opts_prog(w), word);
	for (size_t i = 0; i < w->n && len < sizeof(w->err); i++) {
		if (!opts_prefix(&w->tab[i], name, n))
			continue;
		if (first == NULL)
			first = &w->tab[i];
		else if (opts_same(first, &w->tab[i]))
			continue;
		len += (size_t)snprintf(w->err + len, sizeof(w->err) - len,
		    " '--%s'", w->tab[i].name);
	}
	return OPTS_ERR;
}

/* A long option's value from the rest of its word or the next word. */
static int
opts_long_value(struct opts *w, const struct opts_opt *o, char *eq)
{
	bool gnu = (w->flags & OPTS_GETOPT) != 0;

	if (eq != NULL && o->arg == OPTS_FLAG)
		return gnu ? opts_fail(w, "%s: option '--%s' doesn't allow "
		    "an argument", opts_prog(w), o->name) :
		    opts_fail(w, "--%s takes no value", o->name);
	if (eq != NULL)
		w->arg = eq + 1;
	else if (o->arg == OPTS_VALUE && w->ind + w->nops < w->argc) {
		w->arg = w->argv[w->ind + w->nops];
		opts_take(w, 1);
	} else if (o->arg == OPTS_VALUE)
		return gnu ? opts_fail(w, "%s: option '--%s' requires an "
		    "argument", opts_prog(w), o->name) :
		    opts_fail(w, "--%s needs a value", o->name);
	return o->code;
}

/* The long option in the next word ("--name[=value]"). */
static int
opts_long(struct opts *w)
{
	char *word = w->argv[w->ind + w->nops], *name = word + 2;
	char *eq = strchr(name, '=');
	size_t n = eq != NULL ? (size_t)(eq - name) : strlen(name);
	int i = opts_find_long(w, name, n, eq != NULL);

	opts_take(w, 1);
	if (i == -2)
		return opts_ambiguous(w, word, name, n);
	if (i < 0 && (w->flags & OPTS_GETOPT))
		return opts_fail(w, "%s: unrecognized option '%s'",
		    opts_prog(w), word);
	if (i < 0)
		return opts_fail(w, "unknown option --%.*s",
		    (int)(n > OPTS_SHOW_MAX ? OPTS_SHOW_MAX : n), name);
	return opts_long_value(w, &w->tab[i], eq);
}

/* The option called ch, or NULL. */
static const struct opts_opt *
opts_find_short(const struct opts *w, char ch)
{
	for (size_t i = 0; i < w->n; i++)
		if (w->tab[i].short_name != 0 && w->tab[i].short_name == ch)
			return &w->tab[i];
	return NULL;
}

/* The next short option of the current word ("-x", "-xVALUE", "-ab"). */
static int
opts_short(struct opts *w)
{
	bool gnu = (w->flags & OPTS_GETOPT) != 0;
	char ch = *w->cluster++, *rest = w->cluster;
	const struct opts_opt *o = opts_find_short(w, ch);

	/* the word is done unless more flags of a cluster follow */
	if (*rest == '\0' || !gnu || (o != NULL && o->arg == OPTS_VALUE)) {
		w->cluster = NULL;
		opts_take(w, 1);
	}
	if (o == NULL)
		return gnu ? opts_fail(w, "%s: invalid option -- '%c'",
		    opts_prog(w), ch) : opts_fail(w, "unknown option -%c", ch);
	if (o->arg != OPTS_VALUE && *rest != '\0' && !gnu)
		return opts_fail(w, "-%c takes no value", ch);
	if (o->arg != OPTS_VALUE)
		return o->code;
	if (*rest != '\0')
		w->arg = rest;
	else if (w->ind + w->nops < w->argc) {
		w->arg = w->argv[w->ind + w->nops];
		opts_take(w, 1);
	} else
		return gnu ? opts_fail(w, "%s: option requires an argument "
		    "-- '%c'", opts_prog(w), ch) :
		    opts_fail(w, "-%c needs a value", ch);
	return o->code;
}

/* The next option of the walk. */
int
opts_next(struct opts *w)
{
	const char *a;

	w->arg = NULL;
	w->negated = false;
	w->err[0] = '\0';
	if (w->bad_table)
		return opts_fail(w, "%s: bad option table", opts_prog(w));
	if (w->cluster != NULL)
		return opts_short(w);
	while (!w->done) {
		if (w->ind + w->nops >= w->argc)
			break;
		a = w->argv[w->ind + w->nops];
		if (strcmp(a, "--") == 0) {
			opts_take(w, 1);
			break;
		}
		if (a[0] == '-' && a[1] != '\0') {
			if (a[1] == '-')
				return opts_long(w);
			w->cluster = w->argv[w->ind + w->nops] + 1;
			return opts_short(w);
		}
		if (!(w->flags & OPTS_GETOPT))
			break;
		w->nops++;
	}
	w->done = true;
	return OPTS_END;
}

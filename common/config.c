/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Declarative configuration: see config.h. Every parse builds the values
 * into a shadow copy of the target first and moves them over only when all
 * sources were accepted, so a bad reload leaves the running values alone.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/opts.h"
#include "common/util.h"

#define CONFIG_LINE_MAX		(CONFIG_VALUE_MAX + 256)
#define CONFIG_ENV_MAX		128

/* One option value given on the command line, kept for reloads. */
struct config_arg {
	int	 idx;		/* into opts */
	char	*val;
};

struct config {
	const char		*prog;
	const struct config_opt	*opts;
	size_t			 nopts;
	void			*target;
	size_t			 target_size;
	unsigned int		 flags;
	enum config_source	 src[CONFIG_MAX_OPTS];
	char			*file;
	struct config_arg	*args;
	int			 nargs_saved;
	int			 argc;
	char			**argv;
	int			 argi;	/* first positional argument */
};

/* What a source passes down to the value parsers for error messages. */
struct config_ctx {
	void			*tgt;
	enum config_source	*src;
	char			*err;
	size_t			 errlen;
};

/* Write a formatted error into ctx->err; returns -EINVAL. */
#define config_err(x, ...)	seterr((x)->err, (x)->errlen, __VA_ARGS__)

/* Address of option o's member in tgt. */
static void *
config_slot(void *tgt, const struct config_opt *o)
{
	return (char *)tgt + o->off;
}

/* Bytes occupied by a member of o's type. */
static size_t
config_size(const struct config_opt *o)
{
	switch (o->type) {
	case CONFIG_T_STRING:
	case CONFIG_T_PATH:
		return sizeof(char *);
	case CONFIG_T_INT:
	case CONFIG_T_DURATION:
		return sizeof(int64_t);
	case CONFIG_T_BOOL:
		return sizeof(bool);
	case CONFIG_T_ENUM:
		return sizeof(int);
	case CONFIG_T_UIDS:
		return sizeof(struct config_uids);
	}
	return 0;
}

/* Whether o stores a heap string. */
static bool
config_is_str(const struct config_opt *o)
{
	return o->type == CONFIG_T_STRING || o->type == CONFIG_T_PATH;
}

/* Free a stored string of o, wiping it for secrets. */
static void
config_str_free(const struct config_opt *o, char *s)
{
	if (o->flags & CONFIG_SECRET)
		wipe_free_str(s);
	else
		free(s);
}

/* Free every string option held in tgt. */
static void
config_clear(const struct config *c, void *tgt)
{
	for (size_t i = 0; i < c->nopts; i++) {
		char **p;

		if (!config_is_str(&c->opts[i]))
			continue;
		p = config_slot(tgt, &c->opts[i]);
		config_str_free(&c->opts[i], *p);
		*p = NULL;
	}
}

/* The environment variable name of o into out. */
static const char *
config_env_name(const struct config_opt *o, char *out, size_t outlen)
{
	size_t i, n;

	if (o->env != NULL)
		return o->env;
	n = (size_t)snprintf(out, outlen, "KPGPUD_%s", o->name);
	for (i = 7; i < n && i < outlen; i++)
		out[i] = out[i] == '-' ? '_' : (char)toupper((unsigned char)out[i]);
	return out;
}

/* Parse a range-checked INT or DURATION value of o. */
static int
config_set_num(struct config_ctx *x, const struct config_opt *o,
    const char *val, const char *where, int64_t *ret)
{
	struct buf lo = BUF_INIT(64), hi = BUF_INIT(64);
	int64_t v;
	int r;

	if (o->type == CONFIG_T_INT)
		r = parse_int64(val, INT64_MIN, INT64_MAX, &v);
	else
		r = parse_duration_ms(val, &v);
	if (r == -EINVAL)
		return config_err(x, "%s: %s: bad %s \"%s\"%s", where, o->name,
		    o->type == CONFIG_T_INT ? "integer" : "duration", val,
		    o->type == CONFIG_T_INT ? "" :
		    " (expected e.g. 250ms, 5s, 2m, 1h)");
	if (r == 0 && (o->min != 0 || o->max != 0) &&
	    (v < o->min || v > o->max))
		r = -ERANGE;
	if (r == 0) {
		*ret = v;
		return 0;
	}
	if (o->type == CONFIG_T_INT) {
		buf_printf(&lo, "%lld", (long long)o->min);
		buf_printf(&hi, "%lld", (long long)o->max);
	} else {
		format_duration_ms(o->min, &lo);
		format_duration_ms(o->max, &hi);
	}
	r = config_err(x, "%s: %s: value \"%s\" out of range [%s, %s]",
	    where, o->name, val, buf_str(&lo), buf_str(&hi));
	buf_free(&lo);
	buf_free(&hi);
	return r;
}

/* Parse an ENUM value of o into its index. */
static int
config_set_enum(struct config_ctx *x, const struct config_opt *o,
    const char *val, const char *where, int *ret)
{
	struct buf list = BUF_INIT(1024);
	int r;

	for (int i = 0; o->enums[i] != NULL; i++) {
		if (strcmp(o->enums[i], val) == 0) {
			*ret = i;
			buf_free(&list);
			return 0;
		}
		buf_printf(&list, "%s%s", i ? ", " : "", o->enums[i]);
	}
	r = config_err(x, "%s: %s: bad value \"%s\" (one of: %s)", where,
	    o->name, val, buf_str(&list));
	buf_free(&list);
	return r;
}

/* Parse val for option o and store it in the shadow target. */
static int
config_set(struct config_ctx *x, const struct config_opt *o,
    const char *val, const char *where)
{
	void *slot = config_slot(x->tgt, o);
	struct config_uids *u;
	char bad[64], *s;
	size_t nu;
	int r;

	if (strlen(val) > CONFIG_VALUE_MAX)
		return config_err(x, "%s: %s: value too long (max %d bytes)",
		    where, o->name, CONFIG_VALUE_MAX);
	switch (o->type) {
	case CONFIG_T_PATH:
	case CONFIG_T_STRING:
		/* an empty value unsets: what config_dump prints for unset */
		if (*val == '\0')
			s = NULL;
		else if ((s = strdup(val)) == NULL)
			return -ENOMEM;
		config_str_free(o, *(char **)slot);
		*(char **)slot = s;
		return 0;
	case CONFIG_T_INT:
	case CONFIG_T_DURATION:
		return config_set_num(x, o, val, where, slot);
	case CONFIG_T_BOOL:
		if (parse_bool(val, slot) < 0)
			return config_err(x, "%s: %s: bad boolean \"%s\" "
			    "(true/false, yes/no, on/off, 1/0)", where,
			    o->name, val);
		return 0;
	case CONFIG_T_ENUM:
		return config_set_enum(x, o, val, where, slot);
	case CONFIG_T_UIDS:
		u = slot;
		r = parse_uid_list(val, u->uid, CONFIG_MAX_UIDS, &nu, bad,
		    sizeof(bad));
		if (r == 0)
			u->n = (int)nu;
		if (r == -E2BIG)
			return config_err(x, "%s: %s: more than %d uids",
			    where, o->name, CONFIG_MAX_UIDS);
		if (r < 0)
			return config_err(x, "%s: %s: bad uid or unknown user "
			    "\"%s\"", where, o->name, bad);
		return 0;
	}
	return -EINVAL;
}

/* Apply each option's default. */
static int
config_apply_defaults(const struct config *c, struct config_ctx *x)
{
	int r;

	for (size_t i = 0; i < c->nopts; i++) {
		x->src[i] = CONFIG_SRC_DEFAULT;
		if (c->opts[i].def == NULL)
			continue;
		if ((r = config_set(x, &c->opts[i], c->opts[i].def,
		    "default")) < 0)
			return r;
	}
	return 0;
}

/* Index of the option called name (n bytes), or -1. */
static int
config_index(const struct config *c, const char *name, size_t n)
{
	for (size_t i = 0; i < c->nopts; i++)
		if (strlen(c->opts[i].name) == n &&
		    strncmp(c->opts[i].name, name, n) == 0)
			return (int)i;
	return -1;
}

/* Trim whitespace at both ends of s in place. */
static char *
config_trim(char *s)
{
	size_t n;

	while (isspace((unsigned char)*s))
		s++;
	n = strlen(s);
	while (n > 0 && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
	return s;
}

/* Apply one `key = value` line of the file. */
static int
config_file_line(const struct config *c, struct config_ctx *x, char *line,
    const char *where, int lineno, int *seen)
{
	char *eq, *key, *val;
	int i;

	line = config_trim(line);
	if (*line == '\0' || *line == '#')
		return 0;
	if ((eq = strchr(line, '=')) == NULL)
		return config_err(x, "%s: expected \"key = value\"", where);
	*eq = '\0';
	key = config_trim(line);
	val = config_trim(eq + 1);
	if ((i = config_index(c, key, strlen(key))) < 0)
		return config_err(x, "%s: unknown key \"%.64s\"", where, key);
	if (seen[i] != 0)
		return config_err(x, "%s: duplicate key \"%s\" (first on line "
		    "%d)", where, key, seen[i]);
	seen[i] = lineno;
	if (*val == '"' && str_unquote(val) < 0)
		return config_err(x, "%s: %s: bad quoted value", where, key);
	x->src[i] = CONFIG_SRC_FILE;
	return config_set(x, &c->opts[i], val, where);
}

/* Apply the config file, reporting errors as path:line. */
static int
config_apply_file(const struct config *c, struct config_ctx *x)
{
	int seen[CONFIG_MAX_OPTS] = { 0 };
	char where[512], *data = NULL, *line, *next;
	size_t len = 0;
	int r, lineno = 0;

	if (c->file == NULL)
		return 0;
	r = read_file_capped(c->file, CONFIG_FILE_MAX, &data, &len);
	if (r < 0) {
		config_err(x, "%s: cannot read config file: %s", c->file,
		    r == -EFBIG ? "larger than 1 MiB" : strerror(-r));
		return r;
	}
	if (memchr(data, '\0', len) != NULL) {
		r = config_err(x, "%s: NUL byte in config file", c->file);
		goto fail;
	}
	for (line = data; line != NULL && r == 0; line = next) {
		next = strchr(line, '\n');
		if (next != NULL)
			*next++ = '\0';
		snprintf(where, sizeof(where), "%s:%d", c->file, ++lineno);
		if (strlen(line) > CONFIG_LINE_MAX)
			r = config_err(x, "%s: line too long", where);
		else
			r = config_file_line(c, x, line, where, lineno, seen);
	}
fail:
	wipe(data, len);
	free(data);
	return r;
}

/* Apply KPGPUD_<NAME> variables; empty ones count as unset. */
static int
config_apply_env(const struct config *c, struct config_ctx *x)
{
	char name[CONFIG_ENV_MAX], where[CONFIG_ENV_MAX + 16];
	const char *env, *val;
	int r;

	for (size_t i = 0; i < c->nopts; i++) {
		env = config_env_name(&c->opts[i], name, sizeof(name));
		if ((val = getenv(env)) == NULL || *val == '\0')
			continue;
		snprintf(where, sizeof(where), "environment %s", env);
		x->src[i] = CONFIG_SRC_ENV;
		if ((r = config_set(x, &c->opts[i], val, where)) < 0)
			return r;
	}
	return 0;
}

/* Apply the saved command-line values in order. */
static int
config_apply_args(const struct config *c, struct config_ctx *x)
{
	char where[160];
	int r;

	for (int i = 0; i < c->nargs_saved; i++) {
		const struct config_opt *o = &c->opts[c->args[i].idx];

		snprintf(where, sizeof(where), "command line");
		x->src[c->args[i].idx] = CONFIG_SRC_FLAG;
		if ((r = config_set(x, o, c->args[i].val, where)) < 0)
			return r;
	}
	return 0;
}

/* Refuse unset CONFIG_REQUIRED options. */
static int
config_check_required(const struct config *c, struct config_ctx *x)
{
	char env[CONFIG_ENV_MAX];

	for (size_t i = 0; i < c->nopts; i++) {
		const struct config_opt *o = &c->opts[i];
		void *slot = config_slot(x->tgt, o);
		bool unset;

		if (!(o->flags & CONFIG_REQUIRED))
			continue;
		if (config_is_str(o))
			unset = *(char **)slot == NULL;
		else if (o->type == CONFIG_T_UIDS)
			unset = ((struct config_uids *)slot)->n == 0;
		else
			continue;
		if (unset)
			return config_err(x, "%s is required (--%s, %s or "
			    "\"%s = ...\" in the config file)", o->name,
			    o->name, config_env_name(o, env, sizeof(env)),
			    o->name);
	}
	return 0;
}

/* Build every source into the shadow target of x. */
static int
config_build(const struct config *c, struct config_ctx *x)
{
	int r;

	if ((r = config_apply_defaults(c, x)) < 0 ||
	    (r = config_apply_file(c, x)) < 0 ||
	    (r = config_apply_env(c, x)) < 0 ||
	    (r = config_apply_args(c, x)) < 0 ||
	    (r = config_check_required(c, x)) < 0)
		return r;
	return 0;
}

/* Whether option o differs between two targets. */
static bool
config_differs(const struct config_opt *o, void *a, void *b)
{
	void *sa = config_slot(a, o), *sb = config_slot(b, o);

	if (config_is_str(o)) {
		const char *x = *(char **)sa, *y = *(char **)sb;

		if (x == NULL || y == NULL)
			return x != y;
		return strcmp(x, y) != 0;
	}
	if (o->type == CONFIG_T_UIDS) {
		const struct config_uids *x = sa, *y = sb;

		return x->n != y->n || memcmp(x->uid, y->uid,
		    (size_t)x->n * sizeof(uid_t)) != 0;
	}
	return memcmp(sa, sb, config_size(o)) != 0;
}

/* Move option o's value from the shadow into the target. */
static void
config_move(const struct config_opt *o, void *dst, void *shadow)
{
	void *d = config_slot(dst, o), *s = config_slot(shadow, o);

	if (config_is_str(o)) {
		config_str_free(o, *(char **)d);
		*(char **)d = *(char **)s;
		*(char **)s = NULL;
		return;
	}
	memcpy(d, s, config_size(o));
}

/* Build a shadow of the target from every source; caller frees it. */
static int
config_shadow(struct config *c, void **ret_shadow,
    enum config_source *ret_src, char *err, size_t errlen)
{
	struct config_ctx x = { NULL, ret_src, err, errlen };
	int r;

	if ((x.tgt = calloc(1, c->target_size)) == NULL)
		return -ENOMEM;
	if ((r = config_build(c, &x)) < 0) {
		config_clear(c, x.tgt);
		free(x.tgt);
		return r;
	}
	*ret_shadow = x.tgt;
	return 0;
}

/* Check the option table for programming errors. */
static bool
config_table_ok(const struct config_opt *opts, size_t n)
{
	if (n > CONFIG_MAX_OPTS)
		return false;
	for (size_t i = 0; i < n; i++) {
		const struct config_opt *o = &opts[i];

		if (o->name == NULL || *o->name == '\0' ||
		    strspn(o->name, "abcdefghijklmnopqrstuvwxyz0123456789-") !=
		    strlen(o->name) || strlen(o->name) > 64)
			return false;
		if (strcmp(o->name, "help") == 0 ||
		    strcmp(o->name, "version") == 0 ||
		    strcmp(o->name, "config") == 0 ||
		    strcmp(o->name, "check-config") == 0 ||
		    o->short_flag == 'h' || o->short_flag == 'V')
			return false;
		if (o->type < CONFIG_T_STRING || o->type > CONFIG_T_UIDS ||
		    (o->type == CONFIG_T_ENUM &&
		    (o->enums == NULL || o->enums[0] == NULL)))
			return false;
		for (size_t j = 0; j < i; j++)
			if (strcmp(opts[j].name, o->name) == 0 ||
			    (o->short_flag != 0 &&
			    opts[j].short_flag == o->short_flag))
				return false;
	}
	return true;
}

/* Create a parser for a table and a target struct. */
struct config *
config_new(const char *prog, const struct config_opt *opts, size_t nopts,
    void *target, size_t target_size, unsigned int flags)
{
	struct config *c;

	if (!config_table_ok(opts, nopts))
		return NULL;
	for (size_t i = 0; i < nopts; i++)
		if (opts[i].off + config_size(&opts[i]) > target_size)
			return NULL;
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	c->prog = prog;
	c->opts = opts;
	c->nopts = nopts;
	c->target = target;
	c->target_size = target_size;
	c->flags = flags;
	memset(target, 0, target_size);
	return c;
}

/* Drop the saved command line. */
static void
config_free_args(struct config *c)
{
	for (int i = 0; i < c->nargs_saved; i++)
		config_str_free(&c->opts[c->args[i].idx], c->args[i].val);
	free(c->args);
	c->args = NULL;
	c->nargs_saved = 0;
	free(c->file);
	c->file = NULL;
}

/* Free the config and the strings it put into the target. */
void
config_free(struct config *c)
{
	if (c == NULL)
		return;
	config_clear(c, c->target);
	config_free_args(c);
	free(c);
}

/* Remember one command-line value for this parse and later reloads. */
static int
config_save_arg(struct config *c, int idx, const char *val)
{
	struct config_arg *a;
	char *v;

	if ((v = strdup(val)) == NULL)
		return -ENOMEM;
	a = realloc(c->args, (size_t)(c->nargs_saved + 1) * sizeof(*a));
	if (a == NULL) {
		free(v);
		return -ENOMEM;
	}
	c->args = a;
	a[c->nargs_saved].idx = idx;
	a[c->nargs_saved].val = v;
	c->nargs_saved++;
	return 0;
}

/*
 * Whether --help/-h or --version/-V appears before the operands. A search
 * for two words, not a walk: "--workers --help" asks for help although a
 * walk would read --help as the value of --workers.
 */
static enum config_action
config_scan_info(const struct config *c, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--") == 0 ||
		    ((a[0] != '-' || a[1] == '\0') && (c->flags & CONFIG_F_ARGS)))
			break;
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
			return CONFIG_HELP;
		if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0)
			return CONFIG_VERSION;
	}
	return CONFIG_RUN;
}

/* The walker's codes of the built-in options that take part in a parse. */
#define CONFIG_CODE_FILE	CONFIG_MAX_OPTS		/* --config FILE */
#define CONFIG_CODE_CHECK	(CONFIG_MAX_OPTS + 1)	/* --check-config */

/* The walker's table for c: every option, then --config, --check-config. */
static size_t
config_walk_table(const struct config *c, struct opts_opt *tab)
{
	size_t i;

	for (i = 0; i < c->nopts; i++) {
		const struct config_opt *o = &c->opts[i];
		bool b = o->type == CONFIG_T_BOOL;

		tab[i] = (struct opts_opt){ o->name, o->short_flag,
		    b ? OPTS_EQ : OPTS_VALUE, b, (int)i };
	}
	tab[i++] = (struct opts_opt){ "config", 0, OPTS_VALUE, false,
	    CONFIG_CODE_FILE };
	/* OPTS_EQ: --check-config=X stays "unknown option", as it was */
	tab[i++] = (struct opts_opt){ "check-config", 0, OPTS_EQ, false,
	    CONFIG_CODE_CHECK };
	return i;
}

/* Take one option the walker returned (code) for this parse. */
static int
config_take(struct config *c, struct config_ctx *x, const struct opts *w,
    int code, enum config_action *act)
{
	if (code == OPTS_ERR)
		return config_err(x, "command line: %s", w->err);
	if (code == CONFIG_CODE_CHECK && w->arg != NULL)
		return config_err(x, "command line: unknown option "
		    "--check-config");
	if (code == CONFIG_CODE_CHECK) {
		*act = CONFIG_CHECK;
		return 0;
	}
	if (code == CONFIG_CODE_FILE) {
		free(c->file);
		return (c->file = strdup(w->arg)) == NULL ? -ENOMEM : 0;
	}
	if (w->arg != NULL)
		return config_save_arg(c, code, w->arg);
	return config_save_arg(c, code, w->negated ? "false" : "true");
}

/* Collect the options of argv; stops at operands or "--". */
static int
config_scan_argv(struct config *c, struct config_ctx *x, int argc,
    char **argv, enum config_action *act)
{
	struct opts_opt tab[CONFIG_MAX_OPTS + 2];
	struct opts w;
	int code, r = 0;

	opts_start(&w, argc, argv, tab, config_walk_table(c, tab), 0);
	while (r == 0 && (code = opts_next(&w)) != OPTS_END)
		r = config_take(c, x, &w, code, act);
	if (r < 0)
		return r;
	if (w.ind < argc && !(c->flags & CONFIG_F_ARGS))
		return config_err(x, "command line: unexpected argument "
		    "\"%.64s\"", argv[w.ind]);
	c->argi = w.ind;
	return 0;
}

/* Parse every source into the target. */
int
config_parse(struct config *c, int argc, char **argv,
    enum config_action *ret_action, char *err, size_t errlen)
{
	enum config_source src[CONFIG_MAX_OPTS];
	struct config_ctx x = { NULL, src, err, errlen };
	enum config_action act;
	const char *env;
	void *shadow;
	int r;

	config_free_args(c);
	c->argc = argc;
	c->argv = argv;
	c->argi = argc;
	if ((act = config_scan_info(c, argc, argv)) != CONFIG_RUN) {
		*ret_action = act;
		return 0;
	}
	if ((r = config_scan_argv(c, &x, argc, argv, &act)) < 0)
		return r;
	env = getenv("KPGPUD_CONFIG");
	if (c->file == NULL && env != NULL && *env != '\0' &&
	    (c->file = strdup(env)) == NULL)
		return -ENOMEM;
	if ((r = config_shadow(c, &shadow, src, err, errlen)) < 0)
		return r;
	for (size_t i = 0; i < c->nopts; i++) {
		config_move(&c->opts[i], c->target, shadow);
		c->src[i] = src[i];
	}
	free(shadow);
	*ret_action = act;
	return 0;
}

/* Parse, and print and exit for everything but a normal start. */
void
config_main(struct config *c, int argc, char **argv)
{
	struct buf out = BUF_INIT(0);
	enum config_action act = CONFIG_RUN;
	char err[1024];
	int r;

	r = config_parse(c, argc, argv, &act, err, sizeof(err));
	if (r < 0) {
		if (r != -EINVAL && r != -ENOENT)
			snprintf(err, sizeof(err), "%s", strerror(-r));
		fprintf(stderr, "%s: %s\n", c->prog, err);
		if (act != CONFIG_CHECK)
			fprintf(stderr, "Try '%s --help'.\n", c->prog);
		exit(2);
	}
	if (act == CONFIG_RUN)
		return;
	if (act == CONFIG_VERSION)
		r = buf_printf(&out, "%s %s\n", c->prog, KPGPUD_VERSION);
	else if (act == CONFIG_HELP)
		r = config_usage(c, &out);
	else
		r = config_dump(c, &out);
	if (r < 0 || fwrite(buf_str(&out), 1, out.len, stdout) != out.len ||
	    fflush(stdout) != 0)
		exit(2);
	buf_free(&out);
	exit(0);
}

/* Number of operands after the options. */
int
config_nargs(const struct config *c)
{
	return c->argc > c->argi ? c->argc - c->argi : 0;
}

/* The operands after the options. */
char **
config_args(const struct config *c)
{
	return c->argv != NULL ? c->argv + c->argi : NULL;
}

/* The config file in use. */
const char *
config_file(const struct config *c)
{
	return c->file;
}

/* The placeholder shown after a flag in --help. */
static int
config_metavar(const struct config_opt *o, struct buf *out)
{
	static const char *const names[] = { "", "STRING", "PATH", "N", "",
	    "DURATION", "", "UIDS" };
	int r = 0;

	if (o->type != CONFIG_T_ENUM)
		return buf_puts(out, names[o->type]);
	for (int i = 0; o->enums[i] != NULL && r == 0; i++)
		r = buf_printf(out, "%s%s", i ? "|" : "", o->enums[i]);
	return r;
}

/* One option's entry in --help. */
static int
config_usage_opt(const struct config_opt *o, struct buf *out)
{
	struct buf flag = BUF_INIT(512);
	char env[CONFIG_ENV_MAX];
	int r;

	if (o->short_flag)
		buf_printf(&flag, "  -%c, ", o->short_flag);
	else
		buf_puts(&flag, "      ");
	buf_printf(&flag, "--%s%s", o->type == CONFIG_T_BOOL ? "[no-]" : "",
	    o->name);
	if (o->type != CONFIG_T_BOOL)
		buf_putc(&flag, '=');
	config_metavar(o, &flag);
	r = buf_printf(out, "%-30s%s%s\n", buf_str(&flag),
	    flag.len >= 30 ? "\n                              " : "",
	    o->help ? o->help : "");
	if (r == 0 && (o->type == CONFIG_T_INT || o->type ==
	    CONFIG_T_DURATION) && (o->min != 0 || o->max != 0)) {
		buf_reset(&flag);
		if (o->type == CONFIG_T_INT)
			buf_printf(&flag, "%lld..%lld", (long long)o->min,
			    (long long)o->max);
		else {
			format_duration_ms(o->min, &flag);
			buf_puts(&flag, "..");
			format_duration_ms(o->max, &flag);
		}
		r = buf_printf(out, "%30srange: %s\n", "", buf_str(&flag));
	}
	if (r == 0)
		r = buf_printf(out, "%30sdefault: %s; env: %s\n", "",
		    o->def == NULL ? "(none)" : (o->flags & CONFIG_SECRET) ?
		    "<redacted>" : *o->def == '\0' ? "\"\"" : o->def,
		    config_env_name(o, env, sizeof(env)));
	buf_free(&flag);
	return r;
}

/* Generated usage text, grouped in order of first appearance. */
int
config_usage(const struct config *c, struct buf *out)
{
	int r;

	r = buf_printf(out, "Usage: %s [OPTION]...%s\n", c->prog,
	    (c->flags & CONFIG_F_ARGS) ? " [ARG]..." : "");
	for (size_t g = 0; g < c->nopts && r == 0; g++) {
		const char *grp = c->opts[g].group ? c->opts[g].group : "Options";
		bool dup = false;

		for (size_t j = 0; j < g && !dup; j++)
			dup = strcmp(c->opts[j].group ? c->opts[j].group :
			    "Options", grp) == 0;
		if (dup)
			continue;
		r = buf_printf(out, "\n%s:\n", grp);
		for (size_t i = g; i < c->nopts && r == 0; i++)
			if (strcmp(c->opts[i].group ? c->opts[i].group :
			    "Options", grp) == 0)
				r = config_usage_opt(&c->opts[i], out);
	}
	if (r == 0)
		r = buf_printf(out, "\nGeneral:\n"
		    "      --config=FILE           read options from FILE "
		    "(key = value lines)\n%30senv: KPGPUD_CONFIG\n"
		    "      --check-config          print the effective "
		    "configuration and exit\n"
		    "  -h, --help                  show this help and exit\n"
		    "  -V, --version               show the version and exit\n"
		    "\nPrecedence: defaults < config file < environment < "
		    "flags. See kpgpud.conf(5).\n", "");
	return r;
}

/* Append s, quoted when a config file would not read it back verbatim. */
static int
config_put_value(const char *s, struct buf *out)
{
	size_t n = strlen(s);

	if (n > 0 && !isspace((unsigned char)s[0]) &&
	    !isspace((unsigned char)s[n - 1]) && s[0] != '"' &&
	    strpbrk(s, "\n\r") == NULL)
		return buf_puts(out, s);
	if (n == 0)
		return 0;
	return buf_put_quoted(out, s);
}

/* Format the current value of o. */
int
config_format(const struct config *c, const struct config_opt *o,
    struct buf *out)
{
	void *slot = config_slot(c->target, o);
	const struct config_uids *u = slot;
	int idx, r = 0;

	switch (o->type) {
	case CONFIG_T_STRING:
	case CONFIG_T_PATH:
		if (*(char **)slot == NULL)
			return 0;
		if (o->flags & CONFIG_SECRET)
			return buf_puts(out, "<redacted>");
		return config_put_value(*(char **)slot, out);
	case CONFIG_T_INT:
		return buf_printf(out, "%lld", (long long)*(int64_t *)slot);
	case CONFIG_T_DURATION:
		return format_duration_ms(*(int64_t *)slot, out);
	case CONFIG_T_BOOL:
		return buf_puts(out, *(bool *)slot ? "true" : "false");
	case CONFIG_T_ENUM:
		idx = *(int *)slot;
		for (int i = 0; o->enums[i] != NULL; i++)
			if (i == idx)
				return buf_puts(out, o->enums[i]);
		return buf_printf(out, "%d", idx);
	case CONFIG_T_UIDS:
		for (int i = 0; i < u->n && r == 0; i++)
			r = buf_printf(out, "%s%u", i ? "," : "",
			    (unsigned int)u->uid[i]);
		return r;
	}
	return -EINVAL;
}

/* Effective configuration as `key = value` lines. */
int
config_dump(const struct config *c, struct buf *out)
{
	int r = 0;

	for (size_t i = 0; i < c->nopts && r == 0; i++) {
		if ((r = buf_printf(out, "%s = ", c->opts[i].name)) == 0 &&
		    (r = config_format(c, &c->opts[i], out)) == 0)
			r = buf_putc(out, '\n');
	}
	return r;
}

/* Find an option by long name. */
const struct config_opt *
config_find(const struct config *c, const char *name)
{
	int i = config_index(c, name, strlen(name));

	return i < 0 ? NULL : &c->opts[i];
}

/* Where the current value of o came from. */
enum config_source
config_source_of(const struct config *c, const struct config_opt *o)
{
	size_t i = (size_t)(o - c->opts);

	return i < c->nopts ? c->src[i] : CONFIG_SRC_DEFAULT;
}

/* A word for a source, for logs. */
const char *
config_source_name(enum config_source s)
{
	switch (s) {
	case CONFIG_SRC_FILE:
		return "file";
	case CONFIG_SRC_ENV:
		return "environment";
	case CONFIG_SRC_FLAG:
		return "command line";
	case CONFIG_SRC_DEFAULT:
		break;
	}
	return "default";
}

/* Re-read every source and apply what changed. */
int
config_reload(struct config *c, struct config_change *ret_changes,
    size_t max, size_t *ret_n, char *err, size_t errlen)
{
	enum config_source src[CONFIG_MAX_OPTS];
	void *shadow;
	size_t n = 0;
	int r;

	if ((r = config_shadow(c, &shadow, src, err, errlen)) < 0)
		return r;
	for (size_t i = 0; i < c->nopts; i++) {
		const struct config_opt *o = &c->opts[i];
		bool keep = (o->flags & CONFIG_NORELOAD) != 0;

		if (config_differs(o, c->target, shadow)) {
			if (n < max) {
				ret_changes[n].opt = o;
				ret_changes[n].applied = !keep;
				n++;
			}
			if (keep)
				continue;
			config_move(o, c->target, shadow);
		}
		c->src[i] = src[i];
	}
	config_clear(c, shadow);
	free(shadow);
	*ret_n = n;
	return 0;
}

/* Whether uid is in the list. */
bool
config_uids_has(const struct config_uids *u, uid_t uid)
{
	for (int i = 0; i < u->n; i++)
		if (u->uid[i] == uid)
			return true;
	return false;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Declarative configuration shared by the daemons and kpgpuctl. A program
 * describes its options once, in a table of struct config_opt that points
 * (by offsetof) into a plain struct it owns; config fills that struct from,
 * in increasing precedence:
 *
 *   defaults < config file (--config FILE) < environment (KPGPUD_<NAME>)
 *            < command-line flags
 *
 * The file format is `key = value` lines with `#` comment lines; keys are
 * the long flag names (see man/kpgpud.conf.5). Built-in flags: --help,
 * --version, --check-config, --config FILE. The command line is walked by
 * common/opts.h under its strict rules: exact names, no clusters, options
 * before the operands.
 *
 * Member types, checked at compile time by the CONFIG_* macros:
 *   CONFIG_STRING, CONFIG_PATH	char *  (owned by config; freed by
 *				config_free; NULL when unset)
 *   CONFIG_INT			int64_t, within [min, max]
 *   CONFIG_BOOL		bool   (--name, --no-name, --name=false)
 *   CONFIG_DURATION		int64_t milliseconds ("250ms", "5s", "2m",
 *				"1h", "1m30s"; a bare number is ms; see
 *				parse_duration_ms in util.h)
 *   CONFIG_ENUM		int, index into a NULL-terminated name list
 *   CONFIG_UIDS		struct config_uids ("1000,1001" or user names)
 *
 * Example:
 *	struct sync_conf { char *runtime_dir; int64_t timeout_ms; bool debug; };
 *	static const struct config_opt opts[] = {
 *		CONFIG_PATH(struct sync_conf, runtime_dir, "runtime-dir", 0,
 *		    "/run/kpgpud", "General", "Directory of the sockets.", 0),
 *		...
 *	};
 *	struct sync_conf conf;
 *	struct config *c = config_new("kpgpud-sync", opts,
 *	    nitems(opts), &conf, sizeof(conf), 0);
 *	config_main(c, argc, argv);	// exits on --help, errors, ...
 */
#ifndef KPGPUD_CONFIG_H
#define KPGPUD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/util.h"

#ifndef KPGPUD_VERSION
#define KPGPUD_VERSION "0.0.0"
#endif

#define CONFIG_MAX_OPTS		128
#define CONFIG_MAX_UIDS		16
#define CONFIG_FILE_MAX		(1024 * 1024)
#define CONFIG_VALUE_MAX	4096

enum config_type {
	CONFIG_T_STRING = 1,
	CONFIG_T_PATH,
	CONFIG_T_INT,
	CONFIG_T_BOOL,
	CONFIG_T_DURATION,
	CONFIG_T_ENUM,
	CONFIG_T_UIDS,
};

/* Option flags. */
#define CONFIG_SECRET	0x01	/* shown as <redacted>, wiped on free */
#define CONFIG_NORELOAD	0x02	/* config_reload keeps the old value */
#define CONFIG_REQUIRED	0x04	/* error if still unset after all sources */

struct config_uids {
	int	n;
	uid_t	uid[CONFIG_MAX_UIDS];
};

struct config_opt {
	const char		*name;	/* long flag, file key, env suffix */
	char			 short_flag;	/* 0: none */
	enum config_type	 type;
	size_t			 off;	/* offsetof() into the target struct */
	const char		*def;	/* default, as text; NULL: unset */
	const char		*group;	/* --help section */
	const char		*help;
	int64_t			 min, max;	/* INT and DURATION */
	const char *const	*enums;	/* ENUM: NULL-terminated */
	unsigned int		 flags;
	const char		*env;	/* NULL: KPGPUD_<NAME> */
};

/* Compile-time check that member m of T has type ct; evaluates to 0. */
#define CONFIG__CHK(T, m, ct)	(0 * sizeof(&((T *)0)->m - (ct *)0))
#define CONFIG__OFF(T, m, ct)	(offsetof(T, m) + CONFIG__CHK(T, m, ct))

#define CONFIG_STRING(T, m, name, sf, def, grp, help, fl)		\
	{ (name), (sf), CONFIG_T_STRING, CONFIG__OFF(T, m, char *),	\
	  (def), (grp), (help), 0, 0, NULL, (fl), NULL }
#define CONFIG_PATH(T, m, name, sf, def, grp, help, fl)		\
	{ (name), (sf), CONFIG_T_PATH, CONFIG__OFF(T, m, char *),	\
	  (def), (grp), (help), 0, 0, NULL, (fl), NULL }
#define CONFIG_INT(T, m, name, sf, def, lo, hi, grp, help, fl)	\
	{ (name), (sf), CONFIG_T_INT, CONFIG__OFF(T, m, int64_t),	\
	  (def), (grp), (help), (lo), (hi), NULL, (fl), NULL }
#define CONFIG_BOOL(T, m, name, sf, def, grp, help, fl)		\
	{ (name), (sf), CONFIG_T_BOOL, CONFIG__OFF(T, m, bool),	\
	  (def), (grp), (help), 0, 0, NULL, (fl), NULL }
#define CONFIG_DURATION(T, m, name, sf, def, lo, hi, grp, help, fl)	\
	{ (name), (sf), CONFIG_T_DURATION, CONFIG__OFF(T, m, int64_t),	\
	  (def), (grp), (help), (lo), (hi), NULL, (fl), NULL }
#define CONFIG_ENUM(T, m, name, sf, def, list, grp, help, fl)		\
	{ (name), (sf), CONFIG_T_ENUM, CONFIG__OFF(T, m, int),		\
	  (def), (grp), (help), 0, 0, (list), (fl), NULL }
#define CONFIG_UIDS(T, m, name, sf, def, grp, help, fl)		\
	{ (name), (sf), CONFIG_T_UIDS,					\
	  CONFIG__OFF(T, m, struct config_uids),			\
	  (def), (grp), (help), 0, 0, NULL, (fl), NULL }

/* config_new flags. */
#define CONFIG_F_ARGS	0x01	/* allow positional arguments */

enum config_action {
	CONFIG_RUN = 0,		/* start the program */
	CONFIG_HELP,		/* --help was given */
	CONFIG_VERSION,		/* --version */
	CONFIG_CHECK,		/* --check-config */
};

/* Where an option's current value came from. */
enum config_source {
	CONFIG_SRC_DEFAULT = 0,
	CONFIG_SRC_FILE,
	CONFIG_SRC_ENV,
	CONFIG_SRC_FLAG,
};

struct config;

/* One option that config_reload found changed. */
struct config_change {
	const struct config_opt	*opt;
	bool			 applied;	/* false: CONFIG_NORELOAD */
};

/*
 * Create a parser for opts, filling target (target_size bytes, zeroed
 * here). The table and target must outlive the config. NULL on ENOMEM or
 * an invalid table (duplicate names, bad default: a programming error).
 */
struct config	*config_new(const char *prog, const struct config_opt *opts,
		    size_t nopts, void *target, size_t target_size,
		    unsigned int flags);
/* Free the config and every string it stored in the target (NULL ok). */
void		 config_free(struct config *c);

/*
 * Apply defaults, the --config file, the environment and argv (argv[0] is
 * the program). On error returns -EINVAL (or -errno for file I/O) with a
 * message naming the option and its source in err ("FILE:LINE: ...",
 * "environment KPGPUD_X: ...", "command line: ..."); the target keeps its
 * previous values. --help and --version are reported before anything else
 * is parsed. An empty value unsets a STRING/PATH option (NULL) and empties
 * a uid list; an empty environment variable counts as not set.
 */
int		 config_parse(struct config *c, int argc, char **argv,
		    enum config_action *ret_action, char *err, size_t errlen);

/*
 * For main(): config_parse, then print and exit for --help / --version
 * (0), --check-config (0, or the error and 2) or a parse error (2).
 * Returns only when the program should run.
 */
void		 config_main(struct config *c, int argc, char **argv);

/* Positional arguments left after parsing (CONFIG_F_ARGS). */
int		 config_nargs(const struct config *c);
char		**config_args(const struct config *c);

/* The config file path in use, or NULL. */
const char	*config_file(const struct config *c);

/* Generated usage: grouped options with defaults and env names. */
int		 config_usage(const struct config *c, struct buf *out);
/* Effective configuration, one `key = value` line each, secrets redacted. */
int		 config_dump(const struct config *c, struct buf *out);
/* Format the current value of one option (secrets redacted). */
int		 config_format(const struct config *c,
		    const struct config_opt *o, struct buf *out);
/* Look an option up by long name; NULL if none. */
const struct config_opt *config_find(const struct config *c,
		    const char *name);
/* Where the current value of o came from. */
enum config_source config_source_of(const struct config *c,
		    const struct config_opt *o);
const char	*config_source_name(enum config_source s);

/*
 * Re-read every source (file, environment, the saved argv) for SIGHUP.
 * On error the current values are kept and -EINVAL/-errno returned with a
 * message. Otherwise every option whose value changed is reported in
 * ret_changes (up to max, *ret_n set to the count); new values are applied
 * except for CONFIG_NORELOAD options, which keep their old value and are
 * reported with applied = false. Not thread-safe against readers of the
 * target: call it on the thread that owns the configuration.
 */
int		 config_reload(struct config *c, struct config_change *ret_changes,
		    size_t max, size_t *ret_n, char *err, size_t errlen);

/* Whether uid is in the list. */
bool		 config_uids_has(const struct config_uids *u, uid_t uid);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for common/config.c: precedence defaults < file < env <
 * flags, error messages naming option and source (file:line), every value
 * type, --check-config output with redaction, --help/--version through
 * config_main, reload reporting, positional arguments, and the argv
 * walker's rules as config uses it (no abbreviations, "--", missing and
 * empty values, unknown options).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/config.h"
#include "tests/unit/test.h"
#include "common/util.h"

struct tconf {
	char			*name;
	char			*dir;
	int64_t			 workers;
	bool			 debug;
	int64_t			 timeout_ms;
	int			 policy;
	struct config_uids	 peers;
	char			*token;
	int64_t			 restart_only;
	int			 untouched;	/* not an option */
};

static const char *const policies[] = { "allow", "deny", NULL };

static const struct config_opt topts[] = {
	CONFIG_STRING(struct tconf, name, "name", 'n', "kp", "General",
	    "Instance name.", 0),
	CONFIG_PATH(struct tconf, dir, "runtime-dir", 0, "/run/kpgpud",
	    "General", "Socket directory.", 0),
	CONFIG_INT(struct tconf, workers, "workers", 'w', "4", 1, 64,
	    "Tuning", "Worker threads.", 0),
	CONFIG_BOOL(struct tconf, debug, "debug", 'd', "false", "General",
	    "Debug logging.", 0),
	CONFIG_DURATION(struct tconf, timeout_ms, "timeout", 0, "5s", 100,
	    60000, "Tuning", "Request deadline.", 0),
	CONFIG_ENUM(struct tconf, policy, "miss-policy", 0, "allow", policies,
	    "General", "What to do on a cache miss.", 0),
	CONFIG_UIDS(struct tconf, peers, "peer-uids", 0, NULL, "Security",
	    "Uids allowed to connect.", 0),
	CONFIG_STRING(struct tconf, token, "token", 0, NULL, "Security",
	    "API token.", CONFIG_SECRET),
	CONFIG_INT(struct tconf, restart_only, "queue-size", 0, "100", 1,
	    100000, "Tuning", "Queue length.", CONFIG_NORELOAD),
};

static const char *const tenv[] = {
	"KPGPUD_NAME", "KPGPUD_RUNTIME_DIR", "KPGPUD_WORKERS", "KPGPUD_DEBUG",
	"KPGPUD_TIMEOUT", "KPGPUD_MISS_POLICY", "KPGPUD_PEER_UIDS",
	"KPGPUD_TOKEN", "KPGPUD_QUEUE_SIZE", "KPGPUD_CONFIG",
};

/* Start each test from a clean environment. */
static void
clear_env(void)
{
	for (size_t i = 0; i < nitems(tenv); i++)
		unsetenv(tenv[i]);
}

static char tfile[64];

/* Write text to the per-process temp config file; returns its path. */
static const char *
write_conf(const char *text)
{
	FILE *f;

	snprintf(tfile, sizeof(tfile), "/tmp/kpgpud-conf-%ld.conf",
	    (long)getpid());
	if ((f = fopen(tfile, "w")) == NULL)
		return NULL;
	fputs(text, f);
	fclose(f);
	return tfile;
}

/* Parse argv (NULL-terminated, without argv[0]) into conf. */
static int
parse(struct config *c, const char **args, enum config_action *act,
    char *err, size_t errlen)
{
	char *argv[32];
	int argc = 0;

	argv[argc++] = (char *)"kpgpud-test";
	for (; args != NULL && *args != NULL && argc < 31; args++)
		argv[argc++] = (char *)*args;
	argv[argc] = NULL;
	err[0] = '\0';
	return config_parse(c, argc, argv, act, err, errlen);
}

/* Whether s contains sub (and say what it was otherwise). */
static bool
has(const char *s, const char *sub)
{
	if (strstr(s, sub) != NULL)
		return true;
	fprintf(stderr, "  \"%s\" lacks \"%s\"\n", s, sub);
	return false;
}

/* One test's options struct, parser and last parse's action and error. */
struct tcase {
	struct tconf		 t;
	struct config		*c;
	enum config_action	 act;
	char			 err[512];
};

/* A parser over tc->t for prog (topts); NULL on failure. */
static struct config *
tc_new(struct tcase *tc, const char *prog, int flags)
{
	tc->act = CONFIG_HELP;	/* a parse must set it */
	tc->err[0] = '\0';
	tc->c = config_new(prog, topts, nitems(topts), &tc->t, sizeof(tc->t),
	    flags);
	return tc->c;
}

/* Reload into ch (8 entries), *n of them; tc->err says why it failed. */
static int
tc_reload(struct tcase *tc, struct config_change *ch, size_t *n)
{
	return config_reload(tc->c, ch, 8, n, tc->err, sizeof(tc->err));
}

/* Parse args into tc->t; config_parse's result, tc->err saying why. */
static int
tc_parse(struct tcase *tc, const char **args)
{
	return parse(tc->c, args, &tc->act, tc->err, sizeof(tc->err));
}

TEST(defaults_apply)
{
	struct tcase tc;

	clear_env();
	tc.t.untouched = 42;
	REQUIRE(tc_new(&tc, "kpgpud-test", 0) != NULL);
	tc.t.untouched = 42;
	CHECK_INT(tc_parse(&tc, NULL), 0);
	CHECK_INT(tc.act, CONFIG_RUN);
	CHECK_STR(tc.t.name, "kp");
	CHECK_STR(tc.t.dir, "/run/kpgpud");
	CHECK_INT(tc.t.workers, 4);
	CHECK(!tc.t.debug);
	CHECK_INT(tc.t.timeout_ms, 5000);
	CHECK_INT(tc.t.policy, 0);
	CHECK_INT(tc.t.peers.n, 0);
	CHECK(tc.t.token == NULL);
	CHECK_INT(tc.t.untouched, 42);	/* non-option fields left alone */
	CHECK(config_source_of(tc.c, config_find(tc.c, "workers")) ==
	    CONFIG_SRC_DEFAULT);
	CHECK(config_find(tc.c, "nope") == NULL);
	config_free(tc.c);
}

TEST(precedence_file_env_flag)
{
	const char *args[] = { "--timeout", "250ms", "-w", "9", NULL };
	const char *path;
	struct tcase tc;

	clear_env();
	path = write_conf("# comment\n\n  workers = 2\n"
	    "timeout = 1m\nname = from-file\nmiss-policy = deny\n");
	REQUIRE(path != NULL);
	setenv("KPGPUD_CONFIG", path, 1);
	setenv("KPGPUD_TIMEOUT", "30s", 1);
	setenv("KPGPUD_WORKERS", "3", 1);
	setenv("KPGPUD_DEBUG", "yes", 1);
	REQUIRE(tc_new(&tc, "kpgpud-test", 0) != NULL);
	CHECK_INT(tc_parse(&tc, args), 0);
	CHECK_STR(tc.err, "");
	CHECK_STR(tc.t.name, "from-file");	/* file only */
	CHECK_INT(tc.t.policy, 1);
	CHECK(tc.t.debug);			/* env only */
	CHECK_INT(tc.t.workers, 9);		/* file < env < flag */
	CHECK_INT(tc.t.timeout_ms, 250);
	CHECK_STR(config_file(tc.c), path);
	CHECK(config_source_of(tc.c, config_find(tc.c, "name")) ==
	    CONFIG_SRC_FILE);
	CHECK(config_source_of(tc.c, config_find(tc.c, "debug")) ==
	    CONFIG_SRC_ENV);
	CHECK(config_source_of(tc.c, config_find(tc.c, "workers")) ==
	    CONFIG_SRC_FLAG);
	CHECK_STR(config_source_name(CONFIG_SRC_ENV), "environment");
	/* env beats file without a flag */
	const char *none[] = { NULL };
	CHECK_INT(tc_parse(&tc, none), 0);
	CHECK_INT(tc.t.workers, 3);
	CHECK_INT(tc.t.timeout_ms, 30000);
	config_free(tc.c);
	clear_env();
	unlink(path);
}

TEST(flag_forms)
{
	const char *args[] = { "--name=x", "-d", "--no-debug", "--debug",
	    "-w12", "--peer-uids", "1000, 1001,0", "--token=s3cret",
	    "--config", "/nonexistent-but-unused", NULL };
	const char *args2[] = { "--debug=off", "-nshort", NULL };
	struct tcase tc;

	clear_env();
	REQUIRE(tc_new(&tc, "kpgpud-test", 0) != NULL);
	/* the missing --config file is an error naming it */
	CHECK_INT(tc_parse(&tc, args), -ENOENT);
	CHECK(has(tc.err, "/nonexistent-but-unused"));
	args[8] = NULL;
	CHECK_INT(tc_parse(&tc, args), 0);
	CHECK_STR(tc.t.name, "x");
	CHECK(tc.t.debug);
	CHECK_INT(tc.t.workers, 12);
	CHECK_INT(tc.t.peers.n, 3);
	CHECK(config_uids_has(&tc.t.peers, 1001));
	CHECK(config_uids_has(&tc.t.peers, 0));
	CHECK(!config_uids_has(&tc.t.peers, 1002));
	CHECK_STR(tc.t.token, "s3cret");
	CHECK_INT(tc_parse(&tc, args2), 0);
	CHECK(!tc.t.debug);
	CHECK_STR(tc.t.name, "short");
	CHECK(tc.t.token == NULL);	/* a new parse starts from defaults */
	config_free(tc.c);
}

/* Parse args and expect -EINVAL with an error containing each word. */
static void
expect_err(const char **args, const char *w1, const char *w2)
{
	struct tcase tc;

	REQUIRE(tc_new(&tc, "kpgpud-test", 0) != NULL);
	if (tc_parse(&tc, args) != -EINVAL)
		test_fail(__FILE__, __LINE__, "%s accepted", args[0]);
	else if (!has(tc.err, w1) || (w2 != NULL && !has(tc.err, w2)))
		test_fail(__FILE__, __LINE__, "bad message for %s", args[0]);
	config_free(tc.c);
}

TEST(flag_errors_name_option)
{
	const char *a1[] = { "--bogus", NULL };
	const char *a2[] = { "--workers=0", NULL };
	const char *a3[] = { "--workers", NULL };
	const char *a4[] = { "--timeout=5x", NULL };
	const char *a5[] = { "--timeout=2m", NULL };
	const char *a6[] = { "--miss-policy=maybe", NULL };
	const char *a7[] = { "--debug=perhaps", NULL };
	const char *a8[] = { "--peer-uids=1000,nosuchuser-kpgpud", NULL };
	const char *a9[] = { "stray", NULL };
	const char *a10[] = { "-x", NULL };
	const char *a11[] = { "--workers=", NULL };
	const char *a12[] = { "--peer-uids=1,2,3,4,5,6,7,8,9,10,11,12,13,14,"
	    "15,16,17", NULL };
	const char *a13[] = { "--no-workers", "5", NULL };

	clear_env();
	expect_err(a1, "unknown option --bogus", NULL);
	expect_err(a2, "command line: workers: value \"0\" out of range "
	    "[1, 64]", NULL);
	expect_err(a3, "--workers needs a value", NULL);
	expect_err(a4, "timeout: bad duration \"5x\"", NULL);
	expect_err(a5, "out of range [100ms, 1m]", NULL);
	expect_err(a6, "one of: allow, deny", NULL);
	expect_err(a7, "bad boolean \"perhaps\"", NULL);
	expect_err(a8, "nosuchuser-kpgpud", "peer-uids");
	expect_err(a9, "unexpected argument \"stray\"", NULL);
	expect_err(a10, "unknown option -x", NULL);
	expect_err(a11, "workers: bad integer \"\"", NULL);
	expect_err(a12, "more than 16 uids", NULL);
	/* --no-NAME is for flags only; it is no alias of --NAME */
	expect_err(a13, "unknown option --no-workers", NULL);
}

/* The daemons' rules of the argv walker (common/opts.c), as config uses it. */
TEST(walker_rules)
{
	const char *a1[] = { "--work=3", NULL };
	const char *a2[] = { "--deb", NULL };
	const char *a3[] = { "--bogus=1", NULL };
	const char *a4[] = { "--no-workers", NULL };
	const char *a5[] = { "--no-debug=yes", NULL };
	const char *a6[] = { "--check-config=x", NULL };
	const char *a7[] = { "-dx", NULL };
	const char *a8[] = { "-w", NULL };
	const char *a9[] = { "--config", NULL };
	const char *a10[] = { "-w", "2", "--", "-w", NULL };
	const char *a11[] = { "--miss-policy=", NULL };
	const char *ok1[] = { "--name=", "--runtime-dir=", "--", NULL };
	const char *ok2[] = { "--name", "--debug", "-n", "-w", NULL };
	struct tcase tc;

	clear_env();
	/* no abbreviations, unlike kpgpuctl's subcommands */
	expect_err(a1, "command line: unknown option --work", NULL);
	expect_err(a2, "command line: unknown option --deb", NULL);
	expect_err(a3, "command line: unknown option --bogus", NULL);
	expect_err(a4, "command line: unknown option --no-workers", NULL);
	expect_err(a5, "command line: unknown option --no-debug", NULL);
	expect_err(a6, "command line: unknown option --check-config", NULL);
	expect_err(a7, "command line: -d takes no value", NULL);
	expect_err(a8, "command line: -w needs a value", NULL);
	expect_err(a9, "command line: --config needs a value", NULL);
	expect_err(a10, "command line: unexpected argument \"-w\"", NULL);
	expect_err(a11, "miss-policy: bad value \"\" (one of: allow, deny)",
	    NULL);
	REQUIRE(tc_new(&tc, "kpgpud-test", 0) != NULL);
	/* "--name=" unsets; "--" with nothing after it is fine */
	CHECK_INT(tc_parse(&tc, ok1), 0);
	CHECK(tc.t.name == NULL && tc.t.dir == NULL);
	/* a value is the next word, whatever it looks like */
	CHECK_INT(tc_parse(&tc, ok2), 0);
	CHECK_STR(tc.t.name, "-w");
	CHECK(!tc.t.debug);
	config_free(tc.c);
}

TEST(env_errors_name_variable)
{
	const char *none[] = { NULL };

	clear_env();
	setenv("KPGPUD_WORKERS", "100", 1);
	expect_err(none, "environment KPGPUD_WORKERS", "workers");
	clear_env();
	setenv("KPGPUD_WORKERS", "", 1);	/* empty = unset */
	struct tcase tc;
	REQUIRE(tc_new(&tc, "p", 0) != NULL);
	CHECK_INT(tc_parse(&tc, none), 0);
	CHECK_INT(tc.t.workers, 4);
	config_free(tc.c);
	clear_env();
}

/* Parse with a config file holding text; expect an error with want. */
static void
expect_file_err(const char *text, const char *want)
{
	const char *path = write_conf(text);
	const char *args[] = { "--config", path, NULL };
	char where[128];

	REQUIRE(path != NULL);
	snprintf(where, sizeof(where), "%s:%s", path, want);
	expect_err(args, where, NULL);
	unlink(path);
}

TEST(file_errors_have_line_numbers)
{
	clear_env();
	expect_file_err("workers = 2\n\n# x\nbogus = 1\n",
	    "4: unknown key \"bogus\"");
	expect_file_err("workers 2\n", "1: expected \"key = value\"");
	expect_file_err("name = a\nname = b\n",
	    "2: duplicate key \"name\" (first on line 1)");
	expect_file_err("\n\nworkers = 99\n", "3: workers: value \"99\" out "
	    "of range");
	expect_file_err("name = \"unterminated\n", "1: name: bad quoted");
	expect_file_err("config = /x\n", "1: unknown key \"config\"");
}

TEST(file_values_and_quotes)
{
	const char *path = write_conf("name = \"  spaced # not a comment \"\n"
	    "token=abc=def\r\n  debug=on  \npeer-uids = root\n");
	const char *args[] = { "--config", path, NULL };
	struct tcase tc;

	clear_env();
	REQUIRE(tc_new(&tc, "kpgpud-test", 0) != NULL && path != NULL);
	CHECK_INT(tc_parse(&tc, args), 0);
	CHECK_STR(tc.err, "");
	CHECK_STR(tc.t.name, "  spaced # not a comment ");
	CHECK_STR(tc.t.token, "abc=def");
	CHECK(tc.t.debug);
	CHECK_INT(tc.t.peers.n, 1);
	CHECK_INT(tc.t.peers.uid[0], 0);
	/* an empty value unsets a string with a default */
	write_conf("name =\nruntime-dir = \"\"\n");
	CHECK_INT(tc_parse(&tc, args), 0);
	CHECK(tc.t.name == NULL && tc.t.dir == NULL);
	config_free(tc.c);
	unlink(path);
}

TEST(check_config_dump_redacts)
{
	const char *args[] = { "--check-config", "--token", "s3cret",
	    "--name", " x", "--peer-uids=7,8", NULL };
	struct buf b = BUF_INIT(0);
	struct tcase tc;

	clear_env();
	REQUIRE(tc_new(&tc, "kpgpud-test", 0) != NULL);
	CHECK_INT(tc_parse(&tc, args), 0);
	CHECK_INT(tc.act, CONFIG_CHECK);
	CHECK_INT(config_dump(tc.c, &b), 0);
	CHECK_STR(buf_str(&b),
	    "name = \" x\"\n"
	    "runtime-dir = /run/kpgpud\n"
	    "workers = 4\n"
	    "debug = false\n"
	    "timeout = 5s\n"
	    "miss-policy = allow\n"
	    "peer-uids = 7,8\n"
	    "token = <redacted>\n"
	    "queue-size = 100\n");
	CHECK(strstr(buf_str(&b), "s3cret") == NULL);
	buf_free(&b);
	config_free(tc.c);
}

TEST(dump_reads_back)
{
	const char *args[] = { "--name", "a \"q\" \\ b\t", "--timeout=45s",
	    "--debug", NULL };
	struct buf b1 = BUF_INIT(0), b2 = BUF_INIT(0);
	struct tcase tc;
	const char *path;

	clear_env();
	REQUIRE(tc_new(&tc, "kpgpud-test", 0) != NULL);
	CHECK_INT(tc_parse(&tc, args), 0);
	CHECK_INT(config_dump(tc.c, &b1), 0);
	/* the dump (minus empty values) is itself a valid config file */
	path = write_conf(buf_str(&b1));
	const char *args2[] = { "--config", path, NULL };
	CHECK_INT(tc_parse(&tc, args2), 0);
	CHECK_STR(tc.err, "");
	CHECK_INT(config_dump(tc.c, &b2), 0);
	CHECK_STR(buf_str(&b1), buf_str(&b2));
	CHECK_STR(tc.t.name, "a \"q\" \\ b\t");
	CHECK(tc.t.token == NULL);
	CHECK(strstr(buf_str(&b1), "timeout = 45s\n") != NULL);
	buf_free(&b1);
	buf_free(&b2);
	config_free(tc.c);
	unlink(path);
}

/* Run config_main in a child with args; capture stdout; return status. */
static int
run_main(const char **args, char *out, size_t outlen)
{
	int p[2], st = -1;
	ssize_t n, got = 0;
	pid_t pid;

	if (pipe(p) < 0)
		return -1;
	fflush(NULL);
	if ((pid = fork()) == 0) {
		char *argv[16];
		int argc = 0;
		struct tcase tc;

		dup2(p[1], 1);
		close(p[0]);
		argv[argc++] = (char *)"kpgpud-test";
		while (args[argc - 1] != NULL && argc < 15) {
			argv[argc] = (char *)args[argc - 1];
			argc++;
		}
		argv[argc] = NULL;
		if (tc_new(&tc, "kpgpud-test", 0) != NULL)
			config_main(tc.c, argc, argv);
		_exit(tc.c != NULL ? 99 : 98);
	}
	close(p[1]);
	while ((n = read(p[0], out + got, outlen - 1 - (size_t)got)) > 0)
		got += n;
	out[got] = '\0';
	close(p[0]);
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

TEST(main_help_version_check)
{
	const char *help[] = { "--workers=oops", "--help", NULL };
	const char *ver[] = { "-V", NULL };
	const char *chk[] = { "--check-config", "--token=x", NULL };
	const char *bad[] = { "--check-config", "--workers=0", NULL };
	const char *run[] = { "--workers=5", NULL };
	static char out[16384];

	clear_env();
	/* --help wins over other errors */
	CHECK_INT(run_main(help, out, sizeof(out)), 0);
	CHECK(has(out, "Usage: kpgpud-test [OPTION]..."));
	CHECK(has(out, "\nTuning:\n"));
	CHECK(has(out, "-w, --workers=N"));
	CHECK(has(out, "default: 4; env: KPGPUD_WORKERS"));
	CHECK(has(out, "range: 100ms..1m"));
	CHECK(has(out, "--[no-]debug"));
	CHECK(has(out, "--miss-policy=allow|deny"));
	CHECK(has(out, "--check-config"));
	CHECK_INT(run_main(ver, out, sizeof(out)), 0);
	CHECK_STR(out, "kpgpud-test " KPGPUD_VERSION "\n");
	CHECK_INT(run_main(chk, out, sizeof(out)), 0);
	CHECK(has(out, "token = <redacted>\n"));
	CHECK_INT(run_main(bad, out, sizeof(out)), 2);
	CHECK_STR(out, "");
	CHECK_INT(run_main(run, out, sizeof(out)), 99);	/* returned */
}

TEST(reload_reports_changes)
{
	struct config_change ch[8];
	struct tcase tc;
	size_t n = 99;
	const char *path = write_conf("workers = 2\nqueue-size = 10\n"
	    "name = one\n");
	const char *args[] = { "--config", path, "--debug", NULL };

	clear_env();
	REQUIRE(tc_new(&tc, "kpgpud-test", 0) != NULL && path != NULL);
	CHECK_INT(tc_parse(&tc, args), 0);
	CHECK_INT(tc_reload(&tc, ch, &n), 0);
	CHECK_INT(n, 0);
	write_conf("workers = 3\nqueue-size = 20\nname = one\n"
	    "debug = false\n");
	CHECK_INT(tc_reload(&tc, ch, &n), 0);
	REQUIRE(n == 2);
	CHECK_STR(ch[0].opt->name, "workers");
	CHECK(ch[0].applied);
	CHECK_STR(ch[1].opt->name, "queue-size");
	CHECK(!ch[1].applied);
	CHECK_INT(tc.t.workers, 3);
	CHECK_INT(tc.t.restart_only, 10); /* CONFIG_NORELOAD kept */
	CHECK(tc.t.debug);		/* the flag still wins */
	/* a broken file keeps every current value */
	write_conf("workers = 4\nname = two\nbogus = 1\n");
	CHECK_INT(tc_reload(&tc, ch, &n), -EINVAL);
	CHECK(has(tc.err, ":3: unknown key"));
	CHECK_INT(tc.t.workers, 3);
	CHECK_STR(tc.t.name, "one");
	unlink(path);
	CHECK_INT(tc_reload(&tc, ch, &n), -ENOENT);
	CHECK_STR(tc.t.name, "one");
	config_free(tc.c);
}

TEST(positional_args)
{
	const char *args[] = { "-w", "2", "render", "--name", "x", NULL };
	const char *args2[] = { "--", "-w", NULL };
	struct tcase tc;

	clear_env();
	REQUIRE(tc_new(&tc, "kpgpuctl", CONFIG_F_ARGS) != NULL);
	CHECK_INT(tc_parse(&tc, args), 0);
	CHECK_INT(tc.t.workers, 2);
	CHECK_STR(tc.t.name, "kp");	/* options after the operand are its */
	REQUIRE(config_nargs(tc.c) == 3);
	CHECK_STR(config_args(tc.c)[0], "render");
	CHECK_STR(config_args(tc.c)[1], "--name");
	CHECK_INT(tc_parse(&tc, args2), 0);
	REQUIRE(config_nargs(tc.c) == 1);
	CHECK_STR(config_args(tc.c)[0], "-w");
	config_free(tc.c);
}

struct rconf {
	char	*server;
	struct config_uids u;
};

TEST(required_and_bad_tables)
{
	static const struct config_opt req[] = {
		CONFIG_STRING(struct rconf, server, "server", 0, NULL, NULL,
		    "API server.", CONFIG_REQUIRED),
	};
	static const struct config_opt dup[] = {
		CONFIG_STRING(struct rconf, server, "server", 0, NULL, NULL,
		    "x", 0),
		CONFIG_UIDS(struct rconf, u, "server", 0, NULL, NULL, "x", 0),
	};
	static const struct config_opt reserved[] = {
		CONFIG_STRING(struct rconf, server, "help", 0, NULL, NULL,
		    "x", 0),
	};
	static const struct config_opt shortv[] = {
		CONFIG_STRING(struct rconf, server, "server", 'V', NULL, NULL,
		    "x", 0),
	};
	const char *none[] = { NULL };
	const char *given[] = { "--server=https://k:6443", NULL };
	struct rconf r;
	struct config *c;
	enum config_action act;
	char err[256];

	clear_env();
	CHECK(config_new("p", dup, 2, &r, sizeof(r), 0) == NULL);
	CHECK(config_new("p", reserved, 1, &r, sizeof(r), 0) == NULL);
	CHECK(config_new("p", shortv, 1, &r, sizeof(r), 0) == NULL);
	CHECK(config_new("p", req, 1, &r, sizeof(void *) - 1, 0) == NULL);
	c = config_new("p", req, 1, &r, sizeof(r), 0);
	REQUIRE(c != NULL);
	CHECK_INT(parse(c, none, &act, err, sizeof(err)), -EINVAL);
	CHECK(has(err, "server is required"));
	CHECK(has(err, "KPGPUD_SERVER"));
	CHECK_INT(parse(c, given, &act, err, sizeof(err)), 0);
	CHECK_STR(r.server, "https://k:6443");
	config_free(c);
	config_free(NULL);
}

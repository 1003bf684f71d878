/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for common/fault.c: arming from a spec and from the
 * environment, each action and modifier, all-or-nothing arming, thread
 * safety. Test builds define KPGPUD_FAULTS; without it FAULT() must be 0.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fault.h"
#include "common/util.h"
#include "tests/unit/test.h"

#if FAULTS_ENABLED

TEST(unarmed_points_pass)
{
	fault_clear();
	CHECK_INT(FAULT("nothing.armed"), 0);
	CHECK_INT(fault_fired("nothing.armed"), -ENOENT);
}

TEST(error_actions)
{
	fault_clear();
	CHECK_INT(fault_arm("ipc.write=error,kube.get=error:ECONNRESET,"
	    "db.step=error:28"), 0);
	CHECK_INT(FAULT("ipc.write"), -EIO);
	CHECK_INT(FAULT("kube.get"), -ECONNRESET);
	CHECK_INT(FAULT("db.step"), -28);
	CHECK_INT(FAULT("other"), 0);
	CHECK_INT(fault_fired("ipc.write"), 1);
	fault_clear();
	CHECK_INT(FAULT("ipc.write"), 0);
}

TEST(count_fires_n_times)
{
	fault_clear();
	CHECK_INT(fault_arm("p=error+count:2"), 0);
	CHECK_INT(FAULT("p"), -EIO);
	CHECK_INT(FAULT("p"), -EIO);
	CHECK_INT(FAULT("p"), 0);
	CHECK_INT(FAULT("p"), 0);
	CHECK_INT(fault_fired("p"), 2);
	fault_clear();
}

TEST(after_skips_first_hits)
{
	fault_clear();
	CHECK_INT(fault_arm("p=error:EPIPE+after:2+count:1"), 0);
	CHECK_INT(FAULT("p"), 0);
	CHECK_INT(FAULT("p"), 0);
	CHECK_INT(FAULT("p"), -EPIPE);
	CHECK_INT(FAULT("p"), 0);
	fault_clear();
}

TEST(prob_extremes_and_middle)
{
	int fired = 0;

	fault_clear();
	CHECK_INT(fault_arm("never=error+prob:0,always=error+prob:1,"
	    "half=error+prob:0.5"), 0);
	for (int i = 0; i < 2000; i++) {
		CHECK_INT(FAULT("never"), 0);
		CHECK_INT(FAULT("always"), -EIO);
		fired += FAULT("half") != 0;
	}
	/* binomial(2000, 0.5): outside this range has odds below 1e-40 */
	CHECK(fired > 700 && fired < 1300);
	fault_clear();
}

TEST(delay_sleeps)
{
	uint64_t t0;

	fault_clear();
	CHECK_INT(fault_arm("slow=delay:50"), 0);
	t0 = monotonic_ms();
	CHECK_INT(FAULT("slow"), 0);
	/* a lower bound only: a sleep never ends early */
	CHECK(monotonic_ms() - t0 >= 50);
	CHECK_INT(fault_arm("slow=delay:1+error:ETIMEDOUT"), 0);
	CHECK_INT(FAULT("slow"), -ETIMEDOUT);
	fault_clear();
}

TEST(abort_kills_process)
{
	pid_t pid;
	int st = 0;

	fault_clear();
	fflush(NULL);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		signal(SIGABRT, SIG_DFL);
		if (fault_arm("boom=abort") == 0)
			(void)FAULT("boom");
		_exit(0);
	}
	REQUIRE(waitpid(pid, &st, 0) == pid);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
}

TEST(bad_specs_arm_nothing)
{
	static const char *const bad[] = {
		"noeq", "x=", "=error", "x=bogus", "X=error", "x=count:2",
		"x=error:ENOPE", "x=prob:2+error", "x=prob:+error",
		"x=delay:-1", "x=count:0+error", "x=abort:1", "x=error+after",
		"good=error,bad=zzz", "a b=error",
	};

	fault_clear();
	for (size_t i = 0; i < nitems(bad); i++) {
		if (fault_arm(bad[i]) != -EINVAL)
			test_fail(__FILE__, __LINE__, "accepted \"%s\"",
			    bad[i]);
	}
	CHECK_INT(FAULT("good"), 0);
	CHECK_INT(FAULT("x"), 0);
}

TEST(rearm_and_off)
{
	fault_clear();
	CHECK_INT(fault_arm("p=error"), 0);
	CHECK_INT(fault_arm("p=error:EAGAIN"), 0);	/* replaces */
	CHECK_INT(FAULT("p"), -EAGAIN);
	CHECK_INT(fault_arm("p=off"), 0);
	CHECK_INT(FAULT("p"), 0);
	CHECK_INT(fault_fired("p"), -ENOENT);
}

TEST(too_many_points)
{
	struct buf spec = BUF_INIT(0);

	fault_clear();
	for (int i = 0; i <= FAULT_MAX; i++)
		buf_printf(&spec, "%sp%d=error", i ? "," : "", i);
	CHECK_INT(fault_arm(buf_str(&spec)), -ENOSPC);
	CHECK_INT(FAULT("p0"), 0);
	buf_free(&spec);
}

TEST(list_describes_points)
{
	struct buf b = BUF_INIT(0);

	fault_clear();
	CHECK_INT(fault_arm("a.b=error+count:1,c=delay:1"), 0);
	(void)FAULT("a.b");
	(void)FAULT("a.b");
	CHECK_INT(fault_list(&b), 0);
	CHECK_STR(buf_str(&b), "a.b=error+count:1 hits=2 fired=1 spent\n"
	    "c=delay:1 hits=0 fired=0\n");
	buf_free(&b);
	fault_clear();
}

struct hammer {
	int	fired;
};

/* Hit a shared point many times from one thread. */
static void *
hammer_run(void *arg)
{
	struct hammer *h = arg;

	for (int i = 0; i < 5000; i++)
		h->fired += FAULT("shared") != 0;
	return NULL;
}

TEST(thread_safe_count)
{
	pthread_t t[4];
	struct hammer h[4];
	int total = 0;

	fault_clear();
	CHECK_INT(fault_arm("shared=error+count:1000"), 0);
	for (int i = 0; i < 4; i++) {
		h[i].fired = 0;
		REQUIRE(pthread_create(&t[i], NULL, hammer_run, &h[i]) == 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		total += h[i].fired;
	}
	CHECK_INT(total, 1000);
	CHECK_INT(fault_fired("shared"), 1000);
	fault_clear();
}

/*
 * KPGPUD_FAULT is read once per process, so these tests run themselves in
 * a fresh copy of the binary with the variable set; true if it passed.
 */
static bool
run_self(const char *test, const char *spec)
{
	char self[4096];
	ssize_t n;
	pid_t pid;
	int st = 0;

	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return false;
	self[n] = '\0';
	fflush(NULL);
	if ((pid = fork()) < 0)
		return false;
	if (pid == 0) {
		setenv("KPGPUD_FAULT_TEST_CHILD", "1", 1);
		setenv("KPGPUD_FAULT", spec, 1);
		if (freopen("/dev/null", "w", stdout) == NULL)
			_exit(126);
		execl(self, self, test, (char *)NULL);
		_exit(127);
	}
	return waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
	    WEXITSTATUS(st) == 0;
}

TEST(env_arms_at_start)
{
	if (getenv("KPGPUD_FAULT_TEST_CHILD") == NULL) {
		CHECK(run_self("env_arms_at_start",
		    "env.point=error:ECONNREFUSED+count:1"));
		return;
	}
	CHECK_INT(fault_init(), 0);
	CHECK_INT(FAULT("env.point"), -ECONNREFUSED);
	CHECK_INT(FAULT("env.point"), 0);
}

TEST(env_bad_spec_reported)
{
	if (getenv("KPGPUD_FAULT_TEST_CHILD") == NULL) {
		CHECK(run_self("env_bad_spec_reported", "ok.point=error,bad"));
		return;
	}
	CHECK_INT(fault_init(), -EINVAL);
	CHECK_INT(FAULT("ok.point"), 0);
}

#else

TEST(release_fault_is_constant_zero)
{
	CHECK_INT(FAULT("anything"), 0);
	CHECK_INT(fault_arm("x=error"), -ENOTSUP);
}

#endif

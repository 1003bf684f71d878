/* SPDX-License-Identifier: Apache-2.0 */
/* Logging: see log.h. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"

static const char *log_prog = "kpgpud";
static volatile sig_atomic_t log_debug_on;

/* Set the program name shown in each line and the initial debug state. */
void
log_init(const char *progname, bool debug)
{
	if (progname != NULL)
		log_prog = progname;
	log_debug_on = debug;
}

/* Turn debug messages on or off. */
void
log_set_debug(bool on)
{
	log_debug_on = on;
}

/* Flip debug messages; safe from a signal handler. */
void
log_toggle_debug(void)
{
	log_debug_on = !log_debug_on;
}

/* Whether debug messages are printed. */
bool
log_debug_enabled(void)
{
	return log_debug_on != 0;
}

/* Format and write one log line with its priority prefix. */
void
log_vmsg(enum log_level lvl, const char *fmt, va_list ap)
{
	char line[4096];
	int n, m;
	int saved = errno;

	n = snprintf(line, sizeof(line), "<%d>%s: ", (int)lvl, log_prog);
	if (n < 0)
		n = 0;
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	if (m < 0)
		m = 0;
	n += m;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	/* one event, one line: never let a format put a newline inside */
	for (int i = 0; i < n; i++)
		if (line[i] == '\n' || line[i] == '\r')
			line[i] = ' ';
	line[n++] = '\n';
	(void)!write(STDERR_FILENO, line, (size_t)n);
	errno = saved;
}

/* Write one log line at the given level. */
void
log_msg(enum log_level lvl, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(lvl, fmt, ap);
	va_end(ap);
}

/* Log at error level and exit; only for start-up or broken invariants. */
void
fatal(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(LOG_LVL_ERR, fmt, ap);
	va_end(ap);
	exit(1);
}

#define LOG_QBUFS	8
#define LOG_QLEN	256

/* Quote len bytes of s into one of a ring of buffers, escaping as we go. */
const char *
log_qn(const char *s, size_t len)
{
	static _Thread_local char bufs[LOG_QBUFS][LOG_QLEN + 8];
	static _Thread_local unsigned int next;
	char *b = bufs[next++ % LOG_QBUFS];
	size_t o = 0;

	if (s == NULL)
		return "(null)";
	b[o++] = '"';
	for (size_t i = 0; i < len && o < LOG_QLEN; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\') {
			b[o++] = '\\';
			b[o++] = (char)c;
		} else if (c < 0x20 || c == 0x7f) {
			o += (size_t)snprintf(b + o, 5, "\\x%02x", c);
		} else {
			b[o++] = (char)c;
		}
		if (i + 1 < len && o >= LOG_QLEN) {
			memcpy(b + o, "...", 3);
			o += 3;
		}
	}
	b[o++] = '"';
	b[o] = '\0';
	return b;
}

/* Quote a NUL-terminated user string for a log field. */
const char *
log_q(const char *s)
{
	return s == NULL ? "(null)" : log_qn(s, strlen(s));
}

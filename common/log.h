/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Logging to stderr, one line per event, with <N> priority prefixes that
 * journald turns into levels. Fields are key=value; user-supplied strings go
 * through log_q() so they are quoted and escaped.
 */
#ifndef KPGPUD_LOG_H
#define KPGPUD_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

enum log_level {
	LOG_LVL_ERR = 3,
	LOG_LVL_WARN = 4,
	LOG_LVL_NOTICE = 5,
	LOG_LVL_INFO = 6,
	LOG_LVL_DEBUG = 7,
};

void log_init(const char *progname, bool debug);
void log_set_debug(bool on);
void log_toggle_debug(void);
bool log_debug_enabled(void);

void log_msg(enum log_level lvl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void log_vmsg(enum log_level lvl, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
void fatal(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));

/* Quote and escape a user string for a log field; rotating static buffers. */
const char *log_q(const char *s);
/* Same for a buffer that is not NUL-terminated. */
const char *log_qn(const char *s, size_t len);

#define log_err(...)	log_msg(LOG_LVL_ERR, __VA_ARGS__)
#define log_warn(...)	log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_notice(...)	log_msg(LOG_LVL_NOTICE, __VA_ARGS__)
#define log_info(...)	log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) do {						\
	if (log_debug_enabled())					\
		log_msg(LOG_LVL_DEBUG, __VA_ARGS__);			\
} while (0)

#endif

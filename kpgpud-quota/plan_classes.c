/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which DeviceClasses are GPU classes, for strict quota: a pure reading of
 * a class's CEL selectors that fails closed (anything it cannot prove to
 * be another driver's counts as GPU). Part of the plan (plan.h).
 */
#include <ctype.h>
#include <stdbool.h>
#include <string.h>

#include "common/util.h"
#include "kpgpud-quota/plan.h"

#define CEL_DEPTH_MAX	32

/* Whether name is one of a comma- or space-separated list. */
static bool
in_list(const char *list, const char *name, size_t len)
{
	const char *s = list, *e;

	while (*s != '\0') {
		while (*s == ',' || *s == ' ')
			s++;
		e = s;
		while (*e != '\0' && *e != ',' && *e != ' ')
			e++;
		if ((size_t)(e - s) == len && len > 0 &&
		    strncmp(s, name, len) == 0)
			return true;
		s = e;
	}
	return false;
}

/* Every name of a driver list is a DNS subdomain (and there is one). */
bool
plan_drivers_valid(const char *drivers)
{
	char buf[1024], *tok, *save;
	int n = 0;

	if (drivers == NULL || strlen(drivers) >= sizeof(buf))
		return false;
	memcpy(buf, drivers, strlen(drivers) + 1);
	for (tok = strtok_r(buf, ", ", &save); tok != NULL;
	    tok = strtok_r(NULL, ", ", &save), n++)
		if (!dns1123_subdomain_valid(tok))
			return false;
	return n > 0;
}

/*
 * Past a CEL string literal starting at s (a quote): the position after
 * it, or NULL when it is not a plain one (unterminated, triple-quoted).
 */
static const char *
cel_skip_string(const char *s, const char *end)
{
	char q = *s;

	if (end - s >= 3 && s[1] == q && s[2] == q)
		return NULL;
	for (s++; s < end; s++) {
		if (*s == '\\') {
			if (++s >= end)
				return NULL;
		} else if (*s == q)
			return s + 1;
	}
	return NULL;
}

/* A plain literal 'x' or "x" spanning exactly [s, end): its text. */
static bool
cel_literal(const char *s, const char *end, const char **ret, size_t *len)
{
	if (end - s < 2 || (*s != '\'' && *s != '"') || end[-1] != *s)
		return false;
	for (const char *c = s + 1; c < end - 1; c++)
		if (*c == '\\' || *c == '\'' || *c == '"')
			return false;
	*ret = s + 1;
	*len = (size_t)(end - s - 2);
	return true;
}

/* Trim blanks around [*s, *end). */
static void
cel_trim(const char **s, const char **end)
{
	while (*s < *end && isspace((unsigned char)**s))
		(*s)++;
	while (*end > *s && isspace((unsigned char)(*end)[-1]))
		(*end)--;
}

/* `device.driver == LIT` or `LIT == device.driver`: LIT's text. */
static bool
cel_driver_eq(const char *s, const char *end, const char **drv,
    size_t *len)
{
	static const char dd[] = "device.driver";
	const char *op = NULL, *a_end, *b;

	for (const char *c = s; c + 1 < end; c++) {
		if (*c == '\'' || *c == '"') {
			if ((c = cel_skip_string(c, end)) == NULL)
				return false;
			c--;
			continue;
		}
		if (c[0] == '=' && c[1] == '=') {
			if (op != NULL)
				return false;
			op = c;
		}
	}
	if (op == NULL)
		return false;
	a_end = op;
	b = op + 2;
	cel_trim(&s, &a_end);
	cel_trim(&b, &end);
	if ((size_t)(a_end - s) == sizeof(dd) - 1 &&
	    strncmp(s, dd, sizeof(dd) - 1) == 0)
		return cel_literal(b, end, drv, len);
	if ((size_t)(end - b) == sizeof(dd) - 1 &&
	    strncmp(b, dd, sizeof(dd) - 1) == 0)
		return cel_literal(s, a_end, drv, len);
	return false;
}

/*
 * Whether the expression [s, end) provably requires device.driver to be a
 * name outside drivers: some top-level conjunct says so.
 */
static bool
cel_non_gpu(const char *s, const char *end, const char *drivers, int depth)
{
	const char *c, *part, *drv;
	int level = 0;
	size_t len;

	cel_trim(&s, &end);
	if (s >= end || depth > CEL_DEPTH_MAX)
		return false;
	/* no top-level ||, ?: or unbalanced brackets; note the && */
	for (c = s; c < end; c++) {
		if (*c == '\'' || *c == '"') {
			if (c > s && isalpha((unsigned char)c[-1]))
				return false;	/* r'', b'': not analysed */
			if ((c = cel_skip_string(c, end)) == NULL)
				return false;
			c--;
		} else if (*c == '(' || *c == '[' || *c == '{')
			level++;
		else if (*c == ')' || *c == ']' || *c == '}') {
			if (--level < 0)
				return false;
		} else if (level == 0 && (*c == '?' ||
		    (*c == '|' && c + 1 < end && c[1] == '|')))
			return false;
	}
	if (level != 0)
		return false;
	/* split at the top-level && */
	for (c = part = s, level = 0; c <= end; c++) {
		if (c < end && (*c == '\'' || *c == '"')) {
			c = cel_skip_string(c, end) - 1;
			continue;
		}
		if (c < end && (*c == '(' || *c == '[' || *c == '{'))
			level++;
		else if (c < end && (*c == ')' || *c == ']' || *c == '}'))
			level--;
		if (c < end && !(level == 0 && *c == '&' && c + 1 < end &&
		    c[1] == '&'))
			continue;
		if (part == s && c == end)
			break;		/* a single conjunct */
		if (cel_non_gpu(part, c, drivers, depth + 1))
			return true;
		part = c + 2;
		c++;
	}
	if (part != s)
		return false;	/* several conjuncts, none proves it */
	/* one conjunct: (inner) or device.driver == LIT */
	if (*s == '(' && end[-1] == ')') {
		level = 0;
		for (c = s; c < end; c++) {
			if (*c == '\'' || *c == '"') {
				c = cel_skip_string(c, end) - 1;
				continue;
			}
			if (*c == '(')
				level++;
			else if (*c == ')' && --level == 0)
				break;
		}
		if (c == end - 1)
			return cel_non_gpu(s + 1, end - 1, drivers,
			    depth + 1);
	}
	if (!cel_driver_eq(s, end, &drv, &len))
		return false;
	return !in_list(drivers, drv, len);
}

/* Whether a DeviceClass counts as a GPU class (fail closed). */
bool
plan_class_is_gpu(json_t *obj, const char *drivers)
{
	json_t *spec = json_object_get(obj, "spec"), *sel, *expr;
	const char *e;
	size_t i;

	if (spec == NULL)
		spec = obj;	/* a bare spec */
	if (drivers == NULL)
		drivers = PLAN_DEFAULT_GPU_DRIVERS;
	sel = json_object_get(spec, "selectors");
	json_array_foreach(sel, i, expr) {
		expr = json_object_get(json_object_get(expr, "cel"),
		    "expression");
		if (!json_is_string(expr))
			continue;
		e = json_string_value(expr);
		/* NULs and comments are not analysed */
		if (strlen(e) != json_string_length(expr) ||
		    strstr(e, "//") != NULL)
			continue;
		if (cel_non_gpu(e, e + strlen(e), drivers, 0))
			return false;
	}
	return true;
}

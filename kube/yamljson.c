/* SPDX-License-Identifier: Apache-2.0 */
/* YAML manifests to jansson values: see yamljson.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "kube/yamljson.h"

struct yj {
	yaml_document_t	*doc;
	size_t		 nodes;		/* values made so far, all documents */
	char		*err;
	size_t		 errlen;
};

/* Record why the stream is refused; -EINVAL. */
__attribute__((format(printf, 2, 3)))
static int
yj_err(struct yj *y, const char *fmt, ...)
{
	va_list ap;

	if (y->err != NULL && y->errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(y->err, y->errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* Whether s (n bytes) is one of the words. */
static bool
is_word(const char *s, size_t n, const char *const *words)
{
	for (; *words != NULL; words++)
		if (strlen(*words) == n && memcmp(s, *words, n) == 0)
			return true;
	return false;
}

/* Whether s (n bytes) is [-+]?[0-9]+ and, with dot, [-+]?[0-9]*.[0-9]+. */
static bool
is_number(const char *s, size_t n, bool dot)
{
	size_t i = 0, digits = 0;
	bool seen_dot = false;

	if (n > 0 && (s[0] == '-' || s[0] == '+'))
		i++;
	for (; i < n; i++) {
		if (s[i] >= '0' && s[i] <= '9')
			digits++;
		else if (dot && s[i] == '.' && !seen_dot)
			seen_dot = true;
		else
			return false;
	}
	return digits > 0 && seen_dot == dot && n < 32;
}

/* A plain scalar typed by the core schema; others are strings. */
static json_t *
scalar(struct yj *y, yaml_node_t *n)
{
	static const char *const nulls[] = { "", "~", "null", "Null", "NULL",
	    NULL };
	static const char *const trues[] = { "true", "True", "TRUE", NULL };
	static const char *const falses[] = { "false", "False", "FALSE", NULL };
	const char *s = (const char *)n->data.scalar.value;
	size_t len = n->data.scalar.length;
	char num[32];

	if (memchr(s, '\0', len) != NULL) {
		yj_err(y, "line %zu: a NUL character in a scalar",
		    n->start_mark.line + 1);
		return NULL;
	}
	if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return json_stringn(s, len);
	if (is_word(s, len, nulls))
		return json_null();
	if (is_word(s, len, trues))
		return json_true();
	if (is_word(s, len, falses))
		return json_false();
	if (is_number(s, len, false) || is_number(s, len, true)) {
		json_t *v;

		memcpy(num, s, len);
		num[len] = '\0';
		v = json_loads(num[0] == '+' ? num + 1 : num,
		    JSON_DECODE_ANY, NULL);
		if (v != NULL)
			return v;
	}
	return json_stringn(s, len);
}

static json_t *node_json(struct yj *y, yaml_node_t *n, int depth);

/* A mapping: scalar keys, each once. */
static json_t *
mapping(struct yj *y, yaml_node_t *n, int depth)
{
	json_t *o = json_object(), *v;
	yaml_node_pair_t *p;

	if (o == NULL)
		return NULL;
	for (p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top;
	    p++) {
		yaml_node_t *k = yaml_document_get_node(y->doc, p->key);
		yaml_node_t *val = yaml_document_get_node(y->doc, p->value);
		char key[256];

		if (k == NULL || k->type != YAML_SCALAR_NODE || val == NULL) {
			yj_err(y, "line %zu: a mapping key that is not a "
			    "scalar", n->start_mark.line + 1);
			goto fail;
		}
		if (k->data.scalar.length >= sizeof(key) ||
		    memchr(k->data.scalar.value, '\0',
		    k->data.scalar.length) != NULL) {
			yj_err(y, "line %zu: a mapping key longer than %zu "
			    "bytes or with NUL", k->start_mark.line + 1,
			    sizeof(key) - 1);
			goto fail;
		}
		memcpy(key, k->data.scalar.value, k->data.scalar.length);
		key[k->data.scalar.length] = '\0';
		if (json_object_get(o, key) != NULL) {
			yj_err(y, "line %zu: key \"%s\" twice",
			    k->start_mark.line + 1, key);
			goto fail;
		}
		if ((v = node_json(y, val, depth + 1)) == NULL ||
		    json_object_set_new(o, key, v) < 0)
			goto fail;
	}
	return o;
fail:
	json_decref(o);
	return NULL;
}

/* One node and what it holds, within the caps. */
static json_t *
node_json(struct yj *y, yaml_node_t *n, int depth)
{
	yaml_node_item_t *it;
	json_t *a, *v;

	if (depth > YAMLJSON_MAX_DEPTH) {
		yj_err(y, "line %zu: nested deeper than %d",
		    n->start_mark.line + 1, YAMLJSON_MAX_DEPTH);
		return NULL;
	}
	if (++y->nodes > YAMLJSON_MAX_NODES) {
		yj_err(y, "more than %d values (aliases count each time)",
		    YAMLJSON_MAX_NODES);
		return NULL;
	}
	switch (n->type) {
	case YAML_SCALAR_NODE:
		return scalar(y, n);
	case YAML_MAPPING_NODE:
		return mapping(y, n, depth);
	case YAML_SEQUENCE_NODE:
		if ((a = json_array()) == NULL)
			return NULL;
		for (it = n->data.sequence.items.start;
		    it < n->data.sequence.items.top; it++) {
			yaml_node_t *e = yaml_document_get_node(y->doc, *it);

			if (e == NULL || (v = node_json(y, e, depth + 1)) ==
			    NULL || json_array_append_new(a, v) < 0) {
				json_decref(a);
				return NULL;
			}
		}
		return a;
	default:
		yj_err(y, "line %zu: an empty node", n->start_mark.line + 1);
		return NULL;
	}
}

/* Parse a stream into its documents; see yamljson.h. */
int
yamljson_parse(const char *buf, size_t len, json_t **ret, char *err,
    size_t errlen)
{
	struct yj y = { .err = err, .errlen = errlen };
	yaml_parser_t parser;
	yaml_document_t doc;
	json_t *docs, *v;
	int r = -EINVAL;

	if (err != NULL && errlen > 0)
		err[0] = '\0';
	if ((docs = json_array()) == NULL)
		return -ENOMEM;
	if (!yaml_parser_initialize(&parser)) {
		json_decref(docs);
		return -ENOMEM;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
	for (;;) {
		yaml_node_t *root;

		if (!yaml_parser_load(&parser, &doc)) {
			yj_err(&y, "line %zu column %zu: %s",
			    parser.problem_mark.line + 1,
			    parser.problem_mark.column + 1,
			    parser.problem ? parser.problem : "invalid YAML");
			goto fail;
		}
		if ((root = yaml_document_get_root_node(&doc)) == NULL) {
			yaml_document_delete(&doc);
			break;
		}
		y.doc = &doc;
		v = node_json(&y, root, 0);
		yaml_document_delete(&doc);
		if (v == NULL) {
			if (err != NULL && errlen > 0 && err[0] == '\0')
				r = -ENOMEM;
			goto fail;
		}
		if (json_is_null(v)) {
			json_decref(v);
			continue;
		}
		if (json_array_size(docs) >= YAMLJSON_MAX_DOCS) {
			json_decref(v);
			yj_err(&y, "more than %d documents", YAMLJSON_MAX_DOCS);
			goto fail;
		}
		if (json_array_append_new(docs, v) < 0) {
			r = -ENOMEM;
			goto fail;
		}
	}
	yaml_parser_delete(&parser);
	*ret = docs;
	return 0;
fail:
	yaml_parser_delete(&parser);
	json_decref(docs);
	return r;
}

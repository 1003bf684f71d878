/* SPDX-License-Identifier: Apache-2.0 */
/*
 * YAML (and so JSON) manifests to jansson values, for files an operator
 * gives a daemon (libyaml). Every document of a stream becomes one element
 * of an array. Plain scalars are typed as YAML 1.2's core schema says (null,
 * true/false, integers, decimals); quoted and block scalars are strings.
 * Mapping keys must be scalars and unique. Pure: no I/O, no logging.
 */
#ifndef KPGPUD_YAMLJSON_H
#define KPGPUD_YAMLJSON_H

#include <stddef.h>

#include <jansson.h>

#define YAMLJSON_MAX_DOCS	256	/* documents in one stream */
#define YAMLJSON_MAX_NODES	100000	/* values made, aliases expanded */
#define YAMLJSON_MAX_DEPTH	64

/*
 * Parse buf (len bytes) into an array of documents (empty documents are
 * left out). 0, or -EINVAL with the reason (line and column where known)
 * in err, or -ENOMEM. *ret is written only on success.
 */
int	 yamljson_parse(const char *buf, size_t len, json_t **ret, char *err,
	    size_t errlen);

#endif

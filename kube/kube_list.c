/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The parts of the Kubernetes client built only on its public API:
 * paginated lists, query-string building and the blocking helper for the
 * CLI.
 *
 * A list's pages are bounded by count (limit) and by bytes (the client's
 * response cap): a page over the cap is asked for again with half the
 * count, down to one object, and the count grows back page by page, so one
 * namespace of huge objects neither fails the list for good nor slows the
 * rest of it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <curl/curl.h>
#include <event2/event.h>

#include "kube/kube.h"

struct kube_list {
	struct kube_client	*c;
	char			*path;
	char			*query;
	char			*rv;
	char			*cont;		/* continue token of the page asked */
	unsigned		 limit;		/* objects asked for in a page */
	unsigned		 limit_max;	/* the caller's limit */
	struct kube_req		*cur;
	kube_list_page_cb	 on_page;
	kube_list_end_cb	 on_end;
	void			*arg;
	bool			 in_cb;		/* on_page or on_end running */
	bool			 cancelled;
};

/* Build "path?k=v&..." with escaped values. */
int
kube_path(char **ret, const char *path, ...)
{
	const char *k, *v;
	char *out = NULL, *esc;
	size_t len = 0;
	FILE *f;
	va_list ap;
	int n = 0;

	if ((f = open_memstream(&out, &len)) == NULL)
		return -ENOMEM;
	fputs(path, f);
	va_start(ap, path);
	while ((k = va_arg(ap, const char *)) != NULL) {
		v = va_arg(ap, const char *);
		if (v == NULL || *v == '\0')
			continue;
		if ((esc = curl_easy_escape(NULL, v, 0)) == NULL) {
			n = -1;
			break;
		}
		fprintf(f, "%c%s=%s", strchr(path, '?') || n ? '&' : '?', k,
		    esc);
		curl_free(esc);
		n++;
	}
	va_end(ap);
	if (fclose(f) != 0 || n < 0) {
		free(out);
		return -ENOMEM;
	}
	*ret = out;
	return 0;
}

/* Free a list's own memory (its request is already gone). */
static void
list_free(struct kube_list *l)
{
	free(l->path);
	free(l->query);
	free(l->rv);
	free(l->cont);
	free(l);
}

static void	 list_page_cb(const struct kube_response *resp, void *arg);

/* Request the next page: the first with resourceVersion, later ones with
 * the continue token. */
static int
list_next(struct kube_list *l, const char *cont)
{
	char lim[16], *pq, *c = NULL;
	int r;

	if (cont != NULL && cont != l->cont && (c = strdup(cont)) == NULL)
		return -ENOMEM;
	if (cont != l->cont) {
		free(l->cont);
		l->cont = c;
	}
	cont = l->cont;
	snprintf(lim, sizeof(lim), "%u", l->limit);
	if ((r = kube_path(&pq, l->path, "limit", lim, "resourceVersion",
	    cont ? NULL : l->rv, "continue", cont, NULL)) < 0)
		return r;
	if (l->query != NULL && *l->query != '\0') {
		char *q;

		r = asprintf(&q, "%s&%s", pq, l->query);
		free(pq);
		if (r == -1)
			return -ENOMEM;
		pq = q;
	}
	r = kube_request(l->c, "GET", pq, NULL, NULL, 0, list_page_cb, l,
	    &l->cur);
	free(pq);
	return r;
}

/* Report the end of a list, then free it (cancel from on_end is a no-op). */
static void
list_finish(struct kube_list *l, const struct kube_response *resp,
    const char *rv)
{
	l->in_cb = true;
	l->on_end(resp, rv, l->arg);
	list_free(l);
}

/* Report a failure that is not the server's response. */
static void
list_fail(struct kube_list *l, const struct kube_response *resp, int error,
    const char *message)
{
	struct kube_response fake = *resp;

	fake.error = error;
	fake.message = message;
	if (error != -EBADMSG) {
		fake.status = 0;
		fake.json = NULL;
	}
	list_finish(l, &fake, NULL);
}

/* One page arrived: hand out its items, then continue or finish. */
static void
list_page_cb(const struct kube_response *resp, void *arg)
{
	struct kube_list *l = arg;
	json_t *md, *items, *v;
	const char *cont, *rv;
	int r;

	l->cur = NULL;
	if (resp->error == -EMSGSIZE && l->limit > 1) {
		/* over the byte cap: the same page again, half as many */
		l->limit /= 2;
		if ((r = list_next(l, l->cont)) < 0)
			list_fail(l, resp, r, "cannot request the page again");
		return;
	}
	items = json_object_get(resp->json, "items");
	md = json_object_get(resp->json, "metadata");
	if (resp->status != 200 || resp->error != 0) {
		list_finish(l, resp, NULL);
		return;
	}
	if (!json_is_array(items)) {
		list_fail(l, resp, -EBADMSG, "list response has no items");
		return;
	}
	v = json_object_get(md, "continue");
	cont = json_is_string(v) ? json_string_value(v) : "";
	v = json_object_get(md, "resourceVersion");
	rv = json_is_string(v) ? json_string_value(v) : "";
	/*
	 * Ask for the next page before handing this one out, so the server
	 * prepares it while the caller stores this one; a count that was
	 * halved grows back.
	 */
	if (l->limit < l->limit_max)
		l->limit = l->limit > l->limit_max / 2 ? l->limit_max :
		    l->limit * 2;
	if (*cont != '\0' && (r = list_next(l, cont)) < 0) {
		list_fail(l, resp, r, "cannot request the next page");
		return;
	}
	l->in_cb = true;
	l->on_page(items, l->arg);
	l->in_cb = false;
	if (l->cancelled) {
		kube_request_cancel(l->cur);
		list_free(l);
		return;
	}
	if (*cont == '\0')
		list_finish(l, resp, rv);
}

/* Start a paginated list. */
int
kube_list_start(struct kube_client *c, const char *path, const char *query,
    unsigned limit, const char *resource_version, kube_list_page_cb on_page,
    kube_list_end_cb on_end, void *arg, struct kube_list **ret)
{
	struct kube_list *l;
	int r;

	if (path == NULL || strchr(path, '?') != NULL || on_page == NULL ||
	    on_end == NULL)
		return -EINVAL;
	if ((l = calloc(1, sizeof(*l))) == NULL)
		return -ENOMEM;
	l->c = c;
	l->limit = l->limit_max = limit ? limit : 500;
	l->on_page = on_page;
	l->on_end = on_end;
	l->arg = arg;
	if ((l->path = strdup(path)) == NULL ||
	    (query && (l->query = strdup(query)) == NULL) ||
	    (resource_version && (l->rv = strdup(resource_version)) == NULL)) {
		list_free(l);
		return -ENOMEM;
	}
	if ((r = list_next(l, NULL)) < 0) {
		list_free(l);
		return r;
	}
	if (ret != NULL)
		*ret = l;
	return 0;
}

/* Stop a list; no more callbacks. */
void
kube_list_cancel(struct kube_list *l)
{
	if (l == NULL)
		return;
	if (l->in_cb) {
		l->cancelled = true;
		return;
	}
	kube_request_cancel(l->cur);
	list_free(l);
}

/* Result slot of kube_request_sync. */
struct sync_result {
	bool		 done;
	long		 status;
	int		 error;
	json_t		*json;
	char		*err;
	size_t		 errlen;
};

/* Callback of kube_request_sync: keep what the caller asked for. */
static void
collect_cb(const struct kube_response *resp, void *arg)
{
	struct sync_result *s = arg;

	s->done = true;
	s->status = resp->status;
	s->error = resp->error;
	s->json = json_incref(resp->json);
	snprintf(s->err, s->errlen, "%s", resp->message);
}

/* One blocking request on a private event loop. */
int
kube_request_sync(struct kube_config *cfg, const struct kube_client_opts *opts,
    const char *method, const char *path_and_query, const char *content_type,
    const char *body, size_t len, long *ret_status, json_t **ret_json,
    char *err, size_t errlen)
{
	struct sync_result s = { .err = err, .errlen = errlen };
	struct event_base *base;
	struct kube_client *c = NULL;
	int r = -ENOMEM;

	snprintf(err, errlen, "out of memory");
	if ((base = event_base_new()) == NULL ||
	    (c = kube_client_new(base, cfg, opts)) == NULL)
		goto fail;
	if ((r = kube_request(c, method, path_and_query, content_type, body,
	    len, collect_cb, &s, NULL)) < 0) {
		snprintf(err, errlen, "bad request: %s", strerror(-r));
		goto fail;
	}
	while (!s.done && event_base_loop(base, EVLOOP_ONCE) == 0)
		;
	r = !s.done ? -EIO : s.status == 0 ? (s.error ? s.error : -EIO) : 0;
	if (r < 0)
		goto fail;
	*ret_status = s.status;
	if (ret_json != NULL)
		*ret_json = s.json;
	else
		json_decref(s.json);
	kube_client_free(c);
	event_base_free(base);
	return 0;
fail:
	json_decref(s.json);
	kube_client_free(c);
	if (base != NULL)
		event_base_free(base);
	return r;
}

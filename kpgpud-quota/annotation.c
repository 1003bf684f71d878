/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Parsing and validation of the kubeplus.io/gpu-isolation annotation. Each
 * field has its own handler in a table but the container policies
 * (initContainers, sidecarContainers, legacyGPU), which the resolved
 * annotation shares (resolved_policy_member); cross-field rules run
 * afterwards.
 * Messages quote user text through msg_str() so an Event never carries raw
 * control characters or unbounded strings.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/util.h"
#include "kpgpud-quota/annotation.h"

#define MSG_STR_MAX	RESOLVED_MSG_MAX

struct parse_ctx {
	struct annotation	 a;
	bool			 have_sharing;
	bool			 have_profile;
	bool			 have_max;
	bool			 have_per_pod;
	bool			 have_topology;
	bool			 have_ts;
	bool			 have_mps;
	char			*err;
	size_t			 errlen;
};

typedef int (*field_fn)(struct parse_ctx *, json_t *);

struct field {
	const char	*name;
	field_fn	 fn;
};

static const char *sharing_names[] = {
	[ANNOTATION_SHARING_EXCLUSIVE] = "exclusive",
	[ANNOTATION_SHARING_MIG] = "mig",
	[ANNOTATION_SHARING_TIME_SLICING] = "time-slicing",
	[ANNOTATION_SHARING_MPS] = "mps",
	[ANNOTATION_SHARING_HYBRID] = "hybrid",
};

static const char *isolation_names[] = {
	[ANNOTATION_ISOLATION_DEVICE] = "device",
	[ANNOTATION_ISOLATION_GPU] = "gpu",
	[ANNOTATION_ISOLATION_PCIE_ROOT] = "pcie-root",
};

static const char *interval_names[] = {
	[ANNOTATION_INTERVAL_UNSET] = NULL,
	[ANNOTATION_INTERVAL_DEFAULT] = "Default",
	[ANNOTATION_INTERVAL_SHORT] = "Short",
	[ANNOTATION_INTERVAL_MEDIUM] = "Medium",
	[ANNOTATION_INTERVAL_LONG] = "Long",
};

/* Record a rejection reason and return -EINVAL. */
#define perr(c, ...)	seterr((c)->err, (c)->errlen, __VA_ARGS__)

/* Copy user text for a message: printable ASCII only, bounded. */
static const char *
msg_str(char buf[MSG_STR_MAX + 4], const char *s)
{
	return resolved_msg_str(buf, s);
}

/* Get a string field value, or fail with a message naming the field. */
static int
get_string(struct parse_ctx *c, const char *field, json_t *v,
    const char **ret)
{
	if (!json_is_string(v))
		return perr(c, "field \"%s\" must be a string", field);
	if (strlen(json_string_value(v)) != json_string_length(v))
		return perr(c, "field \"%s\" contains a NUL character", field);
	*ret = json_string_value(v);
	return 0;
}

/* Get an integer field value within [lo, hi]. */
static int
get_int(struct parse_ctx *c, const char *field, json_t *v, int lo, int hi,
    int *ret)
{
	json_int_t n;

	if (!json_is_integer(v))
		return perr(c, "field \"%s\" must be an integer", field);
	n = json_integer_value(v);
	if (n < lo)
		return perr(c, "%s must be at least %d, got %lld", field, lo,
		    (long long)n);
	if (n > hi)
		return perr(c, "%s must be at most %d, got %lld", field, hi,
		    (long long)n);
	*ret = (int)n;
	return 0;
}

/* Look a word up in a table of names; -1 when absent. */
static int
lookup(const char *const *names, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (names[i] != NULL && strcmp(names[i], s) == 0)
			return (int)i;
	return -1;
}

/* Accept plain and suffixed quantities; no signs, exponents or milli. */
bool
annotation_quantity_valid(const char *s)
{
	static const char *suffixes[] = { "", "Ki", "Mi", "Gi", "Ti", "Pi",
	    "Ei", "k", "M", "G", "T", "P", "E" };
	size_t i = 0, len = strlen(s);

	if (len == 0 || len > ANNOTATION_QTY_MAX)
		return false;
	if (!isdigit((unsigned char)s[0]))
		return false;
	while (isdigit((unsigned char)s[i]))
		i++;
	if (s[i] == '.') {
		i++;
		if (!isdigit((unsigned char)s[i]))
			return false;
		while (isdigit((unsigned char)s[i]))
			i++;
	}
	return lookup(suffixes, nitems(suffixes), s + i) >= 0;
}

/* Check the <slices>g.<memory>gb[+suffix] shape of a MIG profile. */
bool
annotation_profile_valid(const char *s)
{
	size_t i = 0, n, len = strlen(s);

	if (len > ANNOTATION_PROFILE_MAX || s[0] < '1' || s[0] > '8' ||
	    s[1] != 'g' || s[2] != '.')
		return false;
	i = 3;
	if (s[i] < '1' || s[i] > '9')
		return false;
	for (n = 0; isdigit((unsigned char)s[i]); i++)
		n++;
	if (n > 4 || strncmp(s + i, "gb", 2) != 0)
		return false;
	i += 2;
	if (s[i] == '\0')
		return true;
	/* an optional "+me", "+gfx", "+me.all" suffix */
	if (s[i] != '+' || !islower((unsigned char)s[i + 1]))
		return false;
	for (i++, n = 0; s[i] != '\0'; i++, n++)
		if (!(islower((unsigned char)s[i]) || s[i] == '.'))
			return false;
	return n <= 12 && s[i - 1] != '.';
}

/* "sharing": the isolation mode. */
static int
f_sharing(struct parse_ctx *c, json_t *v)
{
	const char *s;
	char b[MSG_STR_MAX + 4];
	int i;

	if (get_string(c, "sharing", v, &s) < 0)
		return -EINVAL;
	if ((i = lookup(sharing_names, nitems(sharing_names), s)) < 0)
		return perr(c, "unknown sharing \"%s\" (expected exclusive, "
		    "mig, time-slicing, mps or hybrid)", msg_str(b, s));
	c->a.sharing = (enum annotation_sharing)i;
	c->have_sharing = true;
	return 0;
}

/* "migProfile": the MIG profile for mig and hybrid. */
static int
f_profile(struct parse_ctx *c, json_t *v)
{
	const char *s;
	char b[MSG_STR_MAX + 4];

	if (get_string(c, "migProfile", v, &s) < 0)
		return -EINVAL;
	if (!annotation_profile_valid(s))
		return perr(c, "malformed migProfile \"%s\" (expected "
		    "<slices>g.<memory>gb with an optional +suffix, e.g. "
		    "\"1g.10gb\" or \"1g.10gb+me\")", msg_str(b, s));
	snprintf(c->a.mig_profile, sizeof(c->a.mig_profile), "%s", s);
	c->have_profile = true;
	return 0;
}

/* "maxDevices": the tenant's device budget. */
static int
f_max(struct parse_ctx *c, json_t *v)
{
	c->have_max = true;
	return get_int(c, "maxDevices", v, 1, ANNOTATION_MAX_DEVICES,
	    &c->a.max_devices);
}

/* "devicesPerPod": devices in each pod's claim (or the shared claim). */
static int
f_per_pod(struct parse_ctx *c, json_t *v)
{
	c->have_per_pod = true;
	return get_int(c, "devicesPerPod", v, 1, ANNOTATION_MAX_PER_POD,
	    &c->a.devices_per_pod);
}

/* "productName": select devices of one product. */
static int
f_product(struct parse_ctx *c, json_t *v)
{
	const char *s;
	char b[MSG_STR_MAX + 4];
	size_t len;

	if (get_string(c, "productName", v, &s) < 0)
		return -EINVAL;
	len = strlen(s);
	if (len == 0 || len > ANNOTATION_PRODUCT_MAX)
		return perr(c, "productName must be 1 to %d characters",
		    ANNOTATION_PRODUCT_MAX);
	for (size_t i = 0; i < len; i++)
		if (!isalnum((unsigned char)s[i]) &&
		    strchr(" -_.()/+:", s[i]) == NULL)
			return perr(c, "productName \"%s\" may contain only "
			    "letters, digits, spaces and -_.()/+:",
			    msg_str(b, s));
	memcpy(c->a.product_name, s, len + 1);
	return 0;
}

/* "minMemory": a capacity selector on device memory. */
static int
f_min_memory(struct parse_ctx *c, json_t *v)
{
	const char *s;
	char b[MSG_STR_MAX + 4];

	if (get_string(c, "minMemory", v, &s) < 0)
		return -EINVAL;
	if (!annotation_quantity_valid(s))
		return perr(c, "malformed minMemory \"%s\" (expected a "
		    "quantity such as \"40Gi\" or \"80G\")", msg_str(b, s));
	snprintf(c->a.min_memory, sizeof(c->a.min_memory), "%s", s);
	return 0;
}

/* "topology": keep a multi-device claim on one PCIe root or one GPU. */
static int
f_topology(struct parse_ctx *c, json_t *v)
{
	static const char *names[] = {
		[ANNOTATION_TOPO_NONE] = "none",
		[ANNOTATION_TOPO_PCIE_ROOT] = "pcieRoot",
		[ANNOTATION_TOPO_PARENT_UUID] = "parentUUID",
	};
	const char *s;
	char b[MSG_STR_MAX + 4];
	int i;

	if (get_string(c, "topology", v, &s) < 0)
		return -EINVAL;
	if ((i = lookup(names, nitems(names), s)) < 0)
		return perr(c, "unknown topology \"%s\" (expected pcieRoot, "
		    "parentUUID or none)", msg_str(b, s));
	c->a.topology = (enum annotation_topology)i;
	c->have_topology = true;
	return 0;
}

/* "timeSlicing": {"interval": ...} for sharing time-slicing. */
static int
f_time_slicing(struct parse_ctx *c, json_t *v)
{
	const char *key, *s;
	char b[MSG_STR_MAX + 4];
	json_t *e;
	int i;

	if (!json_is_object(v))
		return perr(c, "field \"timeSlicing\" must be an object");
	c->have_ts = true;
	json_object_foreach(v, key, e) {
		if (strcmp(key, "interval") != 0)
			return perr(c, "unknown field \"timeSlicing.%s\" "
			    "(known: interval)", msg_str(b, key));
		if (get_string(c, "timeSlicing.interval", e, &s) < 0)
			return -EINVAL;
		i = lookup(interval_names, nitems(interval_names), s);
		if (i < 0)
			return perr(c, "unknown timeSlicing.interval \"%s\" "
			    "(expected Default, Short, Medium or Long)",
			    msg_str(b, s));
		c->a.interval = (enum annotation_interval)i;
	}
	return 0;
}

/* One field of the "mps" object. */
static int
mps_field(struct parse_ctx *c, const char *key, json_t *e)
{
	const char *s;
	char b[MSG_STR_MAX + 4];

	if (strcmp(key, "defaultActiveThreadPercentage") == 0)
		return get_int(c, "mps.defaultActiveThreadPercentage", e, 1,
		    100, &c->a.mps_thread_pct);
	if (strcmp(key, "defaultPinnedDeviceMemoryLimit") == 0) {
		if (get_string(c, "mps.defaultPinnedDeviceMemoryLimit", e,
		    &s) < 0)
			return -EINVAL;
		if (!annotation_quantity_valid(s))
			return perr(c, "malformed "
			    "mps.defaultPinnedDeviceMemoryLimit \"%s\" "
			    "(expected a quantity such as \"10Gi\")",
			    msg_str(b, s));
		snprintf(c->a.mps_pinned_mem, sizeof(c->a.mps_pinned_mem),
		    "%s", s);
		return 0;
	}
	return perr(c, "unknown field \"mps.%s\" (known: "
	    "defaultActiveThreadPercentage, defaultPinnedDeviceMemoryLimit)",
	    msg_str(b, key));
}

/* "mps": MPS daemon settings for sharing mps. */
static int
f_mps(struct parse_ctx *c, json_t *v)
{
	const char *key;
	json_t *e;

	if (!json_is_object(v))
		return perr(c, "field \"mps\" must be an object");
	c->have_mps = true;
	json_object_foreach(v, key, e)
		if (mps_field(c, key, e) < 0)
			return -EINVAL;
	return 0;
}

/* "isolation": which topology domain the tenant keeps to itself. */
static int
f_isolation(struct parse_ctx *c, json_t *v)
{
	const char *s;
	char b[MSG_STR_MAX + 4];
	int i;

	if (get_string(c, "isolation", v, &s) < 0)
		return -EINVAL;
	if ((i = lookup(isolation_names, nitems(isolation_names), s)) < 0)
		return perr(c, "unknown isolation \"%s\" (expected device, gpu "
		    "or pcie-root)", msg_str(b, s));
	c->a.isolation = (enum annotation_isolation)i;
	return 0;
}

static const struct field fields[] = {
	{ "sharing", f_sharing },
	{ "migProfile", f_profile },
	{ "maxDevices", f_max },
	{ "devicesPerPod", f_per_pod },
	{ "productName", f_product },
	{ "minMemory", f_min_memory },
	{ "topology", f_topology },
	{ "timeSlicing", f_time_slicing },
	{ "mps", f_mps },
	{ "isolation", f_isolation },
};

/* Rules that involve more than one field. */
static int
check_cross(struct parse_ctx *c)
{
	const char *sh = annotation_sharing_name(c->a.sharing);
	bool mig = annotation_sharing_mig(c->a.sharing);

	if (!c->have_sharing)
		return perr(c, "missing required field \"sharing\"");
	if (mig && !c->have_profile)
		return perr(c, "sharing \"%s\" requires field \"migProfile\"",
		    sh);
	if (!mig && c->have_profile)
		return perr(c, "field \"migProfile\" is only valid with sharing "
		    "\"mig\" or \"hybrid\", not \"%s\"", sh);
	if (c->a.devices_per_pod > c->a.max_devices)
		return perr(c, "devicesPerPod (%d) exceeds maxDevices (%d)",
		    c->a.devices_per_pod, c->a.max_devices);
	if (c->a.topology == ANNOTATION_TOPO_PARENT_UUID && !mig)
		return perr(c, "topology \"parentUUID\" needs sharing \"mig\" "
		    "or \"hybrid\" (whole GPUs have no parentUUID)");
	if (c->have_ts && c->a.sharing != ANNOTATION_SHARING_TIME_SLICING)
		return perr(c, "field \"timeSlicing\" is only valid with "
		    "sharing \"time-slicing\", not \"%s\"", sh);
	if (c->have_mps && c->a.sharing != ANNOTATION_SHARING_MPS)
		return perr(c, "field \"mps\" is only valid with sharing "
		    "\"mps\", not \"%s\"", sh);
	return 0;
}

/* Run each member of the top-level object through its handler. */
static int
parse_fields(struct parse_ctx *c, json_t *root)
{
	char b[MSG_STR_MAX + 4];
	const char *key;
	json_t *v;
	size_t i;
	int r;

	json_object_foreach(root, key, v) {
		/* initContainers, sidecarContainers, legacyGPU: one grammar */
		if ((r = resolved_policy_member(key, v, &c->a.pol, c->err,
		    c->errlen)) < 0)
			return r;
		if (r > 0) {
			if (strcmp(key, "sidecarContainers") == 0)
				c->a.sidecars_set = true;
			continue;
		}
		for (i = 0; i < nitems(fields); i++)
			if (strcmp(fields[i].name, key) == 0)
				break;
		if (i == nitems(fields))
			return perr(c, "unknown field \"%s\" (known: sharing, "
			    "migProfile, maxDevices, devicesPerPod, "
			    "productName, minMemory, topology, timeSlicing, "
			    "mps, initContainers, sidecarContainers, "
			    "legacyGPU, isolation)",
			    msg_str(b, key));
		if (fields[i].fn(c, v) < 0)
			return -EINVAL;
	}
	return 0;
}

/* Parse, then validate field by field and across fields. */
int
annotation_parse(const char *json, size_t len, struct annotation *ret,
    char *err, size_t errlen)
{
	struct parse_ctx *c;
	json_error_t jerr;
	json_t *root = NULL;
	int r = -EINVAL;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return -ENOMEM;
	c->err = err;
	c->errlen = errlen;
	c->a.max_devices = 1;
	c->a.devices_per_pod = 1;
	for (int i = 0; resolved_default_sidecars[i] != NULL &&
	    i < RESOLVED_MAX_NAMES; i++)
		snprintf(c->a.pol.sidecar_names[c->a.pol.nsidecar_names++], 64,
		    "%s", resolved_default_sidecars[i]);
	if (len > ANNOTATION_MAX_LEN) {
		perr(c, "annotation is %zu bytes, more than the limit of %d",
		    len, ANNOTATION_MAX_LEN);
		goto fail;
	}
	root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
	if (root == NULL) {
		perr(c, "invalid JSON at line %d column %d: %s", jerr.line,
		    jerr.column, jerr.text);
		goto fail;
	}
	if (!json_is_object(root)) {
		perr(c, "annotation must be a JSON object");
		goto fail;
	}
	if (parse_fields(c, root) < 0 || check_cross(c) < 0)
		goto fail;
	*ret = c->a;
	r = 0;
fail:
	json_decref(root);
	free(c);
	return r;
}

/* Map a sharing mode to its annotation word. */
const char *
annotation_sharing_name(enum annotation_sharing s)
{
	if ((size_t)s >= nitems(sharing_names))
		return "?";
	return sharing_names[s];
}

/* Shared-claim modes: one ResourceClaim per tenant. */
bool
annotation_sharing_shared(enum annotation_sharing s)
{
	return s == ANNOTATION_SHARING_TIME_SLICING ||
	    s == ANNOTATION_SHARING_MPS || s == ANNOTATION_SHARING_HYBRID;
}

/* Modes that need a per-profile MIG DeviceClass. */
bool
annotation_sharing_mig(enum annotation_sharing s)
{
	return s == ANNOTATION_SHARING_MIG || s == ANNOTATION_SHARING_HYBRID;
}

/* Map an isolation level to its annotation word. */
const char *
annotation_isolation_name(enum annotation_isolation i)
{
	if ((size_t)i >= nitems(isolation_names))
		return "?";
	return isolation_names[i];
}

/* Map a time-slicing interval to the GpuConfig word. */
const char *
annotation_interval_name(enum annotation_interval i)
{
	if ((size_t)i >= nitems(interval_names))
		return NULL;
	return interval_names[i];
}

/* Map a topology to the attribute a matchAttribute constraint names. */
const char *
annotation_topology_attr(enum annotation_topology t)
{
	switch (t) {
	case ANNOTATION_TOPO_PCIE_ROOT:
		return "resource.kubernetes.io/pcieRoot";
	case ANNOTATION_TOPO_PARENT_UUID:
		return "gpu.nvidia.com/parentUUID";
	default:
		return NULL;
	}
}

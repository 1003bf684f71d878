/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Refusals of valid annotations, pure: settings that need an NVIDIA DRA
 * driver feature gate the operator has not declared on (the driver would
 * refuse to prepare the claim and every pod would stay ContainerCreating),
 * and combinations whose devices can never be allocated (minMemory above
 * what the MIG profile's devices report). plan_build runs both before it
 * composes anything, so a refused instance gets nothing half-made.
 */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "kpgpud-quota/plan.h"

#define NELEM(a)	(sizeof(a) / sizeof((a)[0]))

/*
 * The NVIDIA driver's feature gates (pkg/featuregates/featuregates.go);
 * only the first two change what kpgpud composes.
 */
static const struct {
	const char	*name;
	unsigned	 bit;
} gates[] = {
	{ "TimeSlicingSettings", PLAN_GATE_TIME_SLICING },
	{ "MPSSupport", PLAN_GATE_MPS },
	{ "IMEXDaemonsWithDNSNames", 0 },
	{ "PassthroughSupport", 0 },
	{ "NVMLDeviceHealthCheck", 0 },
	{ "DynamicMIG", 0 },
	{ "ComputeDomainCliques", 0 },
	{ "CrashOnNVLinkFabricErrors", 0 },
	{ "DeviceMetadata", 0 },
	{ "FabricManagerPartitioning", 0 },
	{ "HostManagedIMEXDaemon", 0 },
	{ "NodeLocalFabricIPC", 0 },
	{ "DRAListTypeAttributes", 0 },
	{ "ConsumableShares", 0 },
};

/* The name of one gate bit. */
static const char *
gate_name(unsigned bit)
{
	for (size_t i = 0; i < NELEM(gates); i++)
		if (gates[i].bit == bit)
			return gates[i].name;
	return "?";
}

/* "A,B", "A=true,B=false", "" or "none" -> PLAN_GATE_* bits. */
int
plan_gates_parse(const char *list, unsigned *ret, char *err, size_t errlen)
{
	char buf[PLAN_GATES_MAX_LEN + 1], *tok, *save, *val;
	unsigned bits = 0;
	size_t i;

	if (list == NULL || strcmp(list, "none") == 0) {
		*ret = 0;
		return 0;
	}
	if (strlen(list) > PLAN_GATES_MAX_LEN)
		return seterr(err, errlen, "driver gate list is longer "
		    "than %d bytes", PLAN_GATES_MAX_LEN);
	memcpy(buf, list, strlen(list) + 1);
	for (tok = strtok_r(buf, ", ", &save); tok != NULL;
	    tok = strtok_r(NULL, ", ", &save)) {
		if ((val = strchr(tok, '=')) != NULL)
			*val++ = '\0';
		for (i = 0; i < NELEM(gates); i++)
			if (strcmp(gates[i].name, tok) == 0)
				break;
		if (i == NELEM(gates))
			return seterr(err, errlen, "unknown NVIDIA "
			    "driver feature gate \"%.64s\" (the ones kpgpud "
			    "uses: TimeSlicingSettings, MPSSupport)", tok);
		if (val != NULL && strcmp(val, "true") != 0 &&
		    strcmp(val, "false") != 0)
			return seterr(err, errlen, "driver gate %s=%.32s: "
			    "the value must be true or false", tok, val);
		if (val == NULL || strcmp(val, "true") == 0)
			bits |= gates[i].bit;
		else
			bits &= ~gates[i].bit;
	}
	*ret = bits;
	return 0;
}

/* Which gate a's GpuConfig needs: 0 when it needs none (or has none). */
static unsigned
gate_needed(const struct annotation *a, const char **what)
{
	if (a->sharing == ANNOTATION_SHARING_MPS) {
		*what = "sharing \"mps\"";
		return PLAN_GATE_MPS;
	}
	if (a->sharing == ANNOTATION_SHARING_TIME_SLICING &&
	    a->interval != ANNOTATION_INTERVAL_UNSET) {
		*what = "timeSlicing.interval";
		return PLAN_GATE_TIME_SLICING;
	}
	return 0;
}

/* Refuse a GpuConfig whose gate the operator has not declared on. */
int
plan_check_gates(const struct annotation *a, unsigned declared, char *err,
    size_t errlen)
{
	const char *what = NULL, *name;
	unsigned need = gate_needed(a, &what);

	if (need == 0 || (declared & need) != 0)
		return 0;
	name = gate_name(need);
	seterr(err, errlen, "%s needs the NVIDIA DRA "
	    "driver's feature gate %s (alpha, off by default), not declared "
	    "on: the driver would refuse the claim and its pods would stay "
	    "ContainerCreating. Enable %s on the driver and add it to "
	    "kpgpud-quota --driver-gates, or %s", what, name, name,
	    need == PLAN_GATE_MPS ? "use sharing \"time-slicing\" (no gate "
	    "needed)" : "drop timeSlicing.interval (time-shared without it)");
	return PLAN_EGATE;
}

/*
 * What MIG devices of a profile report as their memory capacity, from the
 * NVIDIA driver (MemorySizeMB x 2^20) on the GPUs kpgpud knows: the
 * largest value, and all of them for the message.
 */
static const struct {
	const char	*profile;
	long		 max_mib;
	const char	*text;
} profiles[] = {
	{ "1g.10gb", 9856, "9728Mi or 9856Mi, by GPU model" },
};

/* The profile without its "+me"-style suffix. */
static void
profile_base(const char *profile, char *out, size_t outlen)
{
	size_t n = strcspn(profile, "+");

	if (n >= outlen)
		n = outlen - 1;
	memcpy(out, profile, n);
	out[n] = '\0';
}

long
plan_profile_memory_mib(const char *profile, const char **text)
{
	char base[ANNOTATION_PROFILE_MAX + 1];

	profile_base(profile, base, sizeof(base));
	for (size_t i = 0; i < NELEM(profiles); i++)
		if (strcmp(profiles[i].profile, base) == 0) {
			if (text != NULL)
				*text = profiles[i].text;
			return profiles[i].max_mib;
		}
	return 0;
}

/*
 * The memory a profile's name stands for, in GiB ("3g.40gb": 40): the
 * most a device of a profile kpgpud has no value for may report (1g.10gb
 * devices report 9728Mi or 9856Mi, below 10Gi).
 */
static long
profile_name_gib(const char *profile)
{
	const char *dot = strchr(profile, '.');

	return dot != NULL ? strtol(dot + 1, NULL, 10) : 0;
}

/* Multiplier of a quantity suffix, as a power of 2 or of 10. */
static int
qty_suffix(const char *s, int *pow2, int *pow10)
{
	static const char *bin[] = { "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei" };
	static const char *dec[] = { "", "k", "M", "G", "T", "P", "E" };

	*pow2 = *pow10 = 0;
	for (size_t i = 1; i < NELEM(bin); i++)
		if (strcmp(s, bin[i]) == 0) {
			*pow2 = 10 * (int)i;
			return 0;
		}
	for (size_t i = 0; i < NELEM(dec); i++)
		if (strcmp(s, dec[i]) == 0) {
			*pow10 = 3 * (int)i;
			return 0;
		}
	return -EINVAL;
}

#define SAT	((uint64_t)1 << 62)	/* saturation: more than any memory */

/*
 * Whether quantity q (annotation_quantity_valid) is more than limit bytes,
 * exactly: q = (I + F / 10^k) x m is compared without rounding up to 18
 * fraction digits; digits past those only count as "more than".
 */
static bool
qty_above(const char *q, uint64_t limit)
{
	uint64_t ip = 0, fp = 0, ten_k = 1, whole;
	int pow2, pow10, k = 0;
	bool rest = false;
	const char *s = q;

	for (; isdigit((unsigned char)*s); s++)
		ip = ip >= SAT / 10 ? SAT : ip * 10 + (uint64_t)(*s - '0');
	if (*s == '.')
		for (s++; isdigit((unsigned char)*s); s++) {
			if (k < 18) {
				fp = fp * 10 + (uint64_t)(*s - '0');
				ten_k *= 10;
				k++;
			} else if (*s != '0')
				rest = true;
		}
	if (qty_suffix(s, &pow2, &pow10) < 0)
		return false;
	/* whole = floor(q) with fraction remainder frac / ten_k (scaled) */
	whole = ip;
	for (int i = 0; i < pow10; i++) {
		whole = whole >= SAT / 10 ? SAT : whole * 10;
		fp *= 10;	/* fp < ten_k <= 10^18: split below */
		if (fp >= ten_k) {
			whole += fp / ten_k;
			fp %= ten_k;
		}
	}
	for (int i = 0; i < pow2; i++) {
		whole = whole >= SAT / 2 ? SAT : whole * 2;
		fp *= 2;
		if (fp >= ten_k) {
			whole += 1;
			fp -= ten_k;
		}
	}
	return whole > limit || (whole == limit && (fp > 0 || rest));
}

/* Refuse a minMemory that no device of the MIG profile reports. */
int
plan_check_allocatable(const struct annotation *a, char *err, size_t errlen)
{
	const char *text = NULL;
	long mib, gib;

	if (!annotation_sharing_mig(a->sharing) || a->min_memory[0] == '\0')
		return 0;
	if ((mib = plan_profile_memory_mib(a->mig_profile, &text)) > 0) {
		if (!qty_above(a->min_memory, (uint64_t)mib << 20))
			return 0;
		seterr(err, errlen, "minMemory %s is more "
		    "than MIG profile %s devices report (memory %s): no "
		    "device can ever be allocated; lower minMemory to at most "
		    "%ldMi or choose a larger profile", a->min_memory,
		    a->mig_profile, text, mib);
		return PLAN_ENEVER;
	}
	if ((gib = profile_name_gib(a->mig_profile)) <= 0 ||
	    !qty_above(a->min_memory, (uint64_t)gib << 30))
		return 0;
	seterr(err, errlen, "minMemory %s is more than MIG "
	    "profile %s devices report (memory at most %ldGi, as the name "
	    "says; 1g.10gb devices report 9728Mi or 9856Mi): no device can "
	    "ever be allocated; lower minMemory or choose a larger profile",
	    a->min_memory, a->mig_profile, gib);
	return PLAN_ENEVER;
}

/* The Warning Event reason of each plan_build refusal. */
const char *
plan_refusal_reason(int r)
{
	if (r == PLAN_EGATE)
		return "DriverFeatureGateRequired";
	if (r == PLAN_ENEVER)
		return "NeverAllocatable";
	return "InvalidGPUIsolation";
}

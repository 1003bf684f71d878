/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The usage ledger's pure logic: ResourceClaims and Pods reduced to what
 * accounting needs, the decision what an observation of a claim does to its
 * allocation interval (open, keep, close, reopen), the refinements later
 * Pod facts allow, GPU-equivalent weights, and window arithmetic.
 * No I/O, no logging: the store (ledger_store.c) and the sync glue
 * (usage.c) call these.
 *
 * An interval is one allocation of one claim: it opens when
 * status.allocation appears and closes when it is cleared or the claim is
 * gone. Each end carries how it was established:
 *   observed      sync saw the change live (the time it received the event);
 *   reconstructed taken from the API after a gap (a consumer Pod's
 *                 startTime or the last finishedAt of its containers);
 *   bounded       only known to lie in a window: the start is the relist
 *                 time (the allocation happened between the last moment sync
 *                 was alive and then), the end is the last moment sync was
 *                 alive (never billed past what was seen). The error of a
 *                 bounded end is at most the time sync was down.
 */
#ifndef KPGPUD_SYNC_LEDGER_H
#define KPGPUD_SYNC_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#define LEDGER_DEVICES_MAX	32	/* AllocationResultsMaxSize */
#define LEDGER_CONSUMERS_MAX	256	/* ResourceClaimReservedForMaxSize */
#define LEDGER_FIELD_MAX	253	/* names, pools, devices, classes */
#define LEDGER_PROFILE_MAX	31
#define LEDGER_SIG_MAX		(LEDGER_DEVICES_MAX * (3 * 254 + 2))
/* A100/H100/H200/B200 expose 7 compute slices; A30 4. */
#define LEDGER_GPU_SLICES	7

enum ledger_how {
	LEDGER_OBSERVED = 0,
	LEDGER_RECONSTRUCTED = 1,
	LEDGER_BOUNDED = 2,
};

/* One allocated device; strings borrow from the claim JSON. */
struct ledger_device {
	const char	*request;
	const char	*driver;
	const char	*pool;
	const char	*device;
	const char	*device_class;	/* "" when the request is not found */
	char		 profile[LEDGER_PROFILE_MAX + 1];	/* "" full GPU */
};

struct ledger_consumer {
	const char	*name;
	const char	*uid;
};

/* A ResourceClaim as the ledger sees it; strings borrow from the JSON. */
struct ledger_claim {
	const char		*ns;
	const char		*name;
	const char		*uid;
	bool			 allocated;
	size_t			 ndevices;
	struct ledger_device	 dev[LEDGER_DEVICES_MAX];
	size_t			 nconsumers;
	struct ledger_consumer	 consumers[LEDGER_CONSUMERS_MAX];
};

/* A Pod that uses claims; strings borrow from the JSON. */
struct ledger_pod {
	const char	*ns;
	const char	*name;
	const char	*uid;
	const char	*phase;		/* "" when absent */
	uint64_t	 start_us;	/* status.startTime, 0 unknown */
	uint64_t	 finish_us;	/* last container finishedAt once the
					   Pod is done, else 0 */
};

/* RFC 3339 (Z or offset, optional fraction) to microseconds since epoch. */
int	 ledger_parse_time(const char *s, uint64_t *ret_us);
/*
 * The compute share of a MIG profile ("1g.10gb" = 1/7, "3g.40gb" = 3/7,
 * A30's "1g.6gb" = 1/4) or 1 for "" (a whole GPU). -EINVAL for a profile
 * that does not start with "<n>g.".
 */
int	 ledger_profile_share(const char *profile, double *ret);
/*
 * The MIG profile of a device: from the DeviceClass selector when it names
 * one (profile == '1g.10gb'), else from the NVIDIA device name
 * (gpu-0-mig-1g10gb-19-0 -> 1g.10gb), else "" (a whole GPU).
 */
void	 ledger_profile_of(const char *class_cel, const char *device,
	    char out[LEDGER_PROFILE_MAX + 1]);

/*
 * Reduce a ResourceClaim. -EINVAL (why says which) for a claim without
 * usable metadata or with more devices or consumers than Kubernetes allows
 * or a field over LEDGER_FIELD_MAX. Profiles are derived from the device
 * names here; the caller may refine them with the class selectors.
 */
int	 ledger_claim_from_json(json_t *obj, struct ledger_claim *ret,
	    const char **ret_why);
/* Reduce a Pod; -EINVAL as above. *ret_uses: it references any claim. */
int	 ledger_pod_from_json(json_t *obj, struct ledger_pod *ret,
	    bool *ret_uses, const char **ret_why);
/*
 * The device signature of a claim's allocation ("driver/pool/device," in
 * sorted order): an interval is re-observed, not reopened, while the
 * signature is the same. -ENAMETOOLONG if len is too small.
 */
int	 ledger_signature(const struct ledger_claim *c, char *buf, size_t len);

/* A claim of a Pod made from a template (the claim generated for it). */
struct ledger_pod_claim {
	const char	*template_name;
	const char	*claim;		/* from status.resourceClaimStatuses */
};

/*
 * The generated claims of a Pod (template entries whose claim name the
 * status records), at most max; returns how many.
 */
size_t	 ledger_pod_claims(json_t *pod, struct ledger_pod_claim *ret,
	    size_t max);
/*
 * Whether a finished Pod ran entirely while sync was away: it started at
 * or after alive_us (the last heartbeat before the gap; 0: no earlier run)
 * and finished by now. Its generated claim's allocation was then never
 * seen and is reconstructed from the Pod's times.
 */
bool	 ledger_pod_in_gap(const struct ledger_pod *p, uint64_t alive_us,
	    uint64_t now_us);

/* What is known when a claim is observed. */
struct ledger_obs {
	bool		 have_open;	/* an open interval is stored */
	const char	*open_sig;	/* its signature */
	uint64_t	 open_start_us;
	bool		 allocated;	/* the claim is allocated now (false
					   also when it is gone) */
	const char	*sig;		/* the signature now */
	bool		 live;		/* sync ran since the last observation */
	uint64_t	 now_us;	/* when this observation was made */
	uint64_t	 alive_us;	/* the last moment sync knew the state
					   before the gap (0: never) */
	uint64_t	 pods_start_us;	/* earliest startTime of consumers */
	uint64_t	 pods_finish_us; /* latest finish of consumers, 0 while
					   any still runs or none is known */
	uint64_t	 prev_end_us;	/* latest end of an earlier interval on
					   the same devices (0: none) */
};

enum ledger_act {
	LEDGER_KEEP = 0,	/* nothing to write (a duplicate) */
	LEDGER_OPEN,		/* open a new interval */
	LEDGER_CLOSE,		/* close the open one */
	LEDGER_REOPEN,		/* close the open one, open a new one */
	LEDGER_IGNORE,		/* not allocated, nothing open */
};

struct ledger_decision {
	enum ledger_act	 act;
	uint64_t	 close_us;
	enum ledger_how	 close_how;
	uint64_t	 close_hi_us;	/* the latest the end can be: close_us
					   when observed, else the time of the
					   observation, never before close_us */
	uint64_t	 open_us;
	enum ledger_how	 open_how;
};

/*
 * What an observation does; pure, total, never an end before its start
 * nor a latest end before the end.
 */
void	 ledger_decide(const struct ledger_obs *o,
	    struct ledger_decision *ret);

/*
 * A later fact about a closed bounded end: a consumer finished at
 * finish_us, and the close was made at upper_us (the relist time). Returns
 * true and the new end when the fact moves the end (reconstructed).
 */
bool	 ledger_refine_end(uint64_t start_us, uint64_t end_us,
	    enum ledger_how how, uint64_t upper_us, uint64_t finish_us,
	    uint64_t *ret_end);
/*
 * The same for a bounded start: a consumer started at pod_start_us and the
 * last moment sync was alive before the gap was lower_us.
 */
bool	 ledger_refine_start(uint64_t start_us, enum ledger_how how,
	    uint64_t lower_us, uint64_t pod_start_us, uint64_t *ret_start);

/*
 * Microseconds of [start, end) inside [since, until) (end 0: open, counted
 * up to now); 0 when they do not overlap or the interval is reversed.
 */
uint64_t ledger_overlap_us(uint64_t start_us, uint64_t end_us,
	    uint64_t now_us, uint64_t since_us, uint64_t until_us);

const char *ledger_how_name(enum ledger_how h);
/* The wall clock in microseconds (the ledger's time base). */
uint64_t ledger_now_us(void);

#endif

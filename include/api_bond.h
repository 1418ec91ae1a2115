/* SPDX-License-Identifier: MIT */
/*
 * Applying a bond's desired settings to the host (agent/net/; PUT /api/v1/bonds/{bond}
 * ?apply=true or ?dry_run=true). Two halves:
 * - the plan (api_bond_plan.c), pure: desired settings + what the host has now (a JSON
 *   snapshot) -> a refusal, or ordered steps and the systemd-networkd files to write. Every
 *   check that can refuse runs here, before anything on the host changes.
 * - the engine (api_bond_apply.c): takes the snapshot (the bond's present settings from the
 *   gateway's network model the agent holds, sysfs for the list of links and their masters,
 *   rtnetlink through libnl-route-3 for addresses and the default route), writes the files,
 *   runs the steps through libnl and, when one fails, undoes the steps done in reverse order
 *   and puts the files back as they were.
 */
#ifndef API_BOND_H
#define API_BOND_H

#include <jansson.h>
#include <stdbool.h>

/* Default folder of the networkd files (agent --networkd-dir). */
#define API_NETWORKD_DIR "/etc/systemd/network"

/* Ranges the kernel's bonding driver accepts (and the API checks). */
#define API_BOND_MIIMON_MAX 60000	/* ms; a minute is already no link monitoring */
#define API_BOND_GRAT_ARP_MAX 255

enum api_bond_verdict {
	API_BOND_OK,
	API_BOND_INVALID,	/* 422: the request cannot be applied as written */
	API_BOND_REFUSED,	/* 409: applying it would touch what it must not */
	API_BOND_FAILED,	/* 422: a step failed on the host; what was done is undone */
};

struct api_bond_result {
	enum api_bond_verdict verdict;
	char field[48];		/* the request field at fault ("slaves[1]"), "" when none */
	char message[320];
	json_t *steps;		/* [{"op", "link", ...}] in order (new reference or NULL) */
	json_t *files;		/* [{"path", "content"}] (new reference or NULL) */
};

struct api_bond_ctx {
	const char *networkd_dir;	/* where the .netdev/.network files go */
	const char *listen;		/* the agent's --listen "ADDR:PORT" */
	bool force;			/* apply even while TCP sessions run over the bond */
	const json_t *gw_state;		/* the gateway's last "state" (NULL: no gateway) */
	/* The bond as the gateway's network model shows it (api_net's bonds: name, mode,
	 * fail_over_mac, miimon, primary, num_grat_arp, slaves [{name, ...}]); NULL when the
	 * model has no such bond. The model follows the kernel by netlink events, so it can lag
	 * a change made a moment ago (docs/NETWORK.md). */
	const json_t *status;
};

/*
 * The host's network as the plan needs it (new reference): {"links": {NAME: {"master":
 * NAME|null, "bond": bool, "up": bool}}, "bond": a copy of status (the model's bond object)
 * or null, "addrs": {NAME: ["10.0.0.1", ...]}, "default_route": [NAME, ...]}. Links come from
 * sysfs under root (api_bond_links_root()); addresses and routes from rtnetlink.
 */
json_t *api_bond_snapshot(const char *root, const json_t *status);
/* Where the links are listed: $ISERGW_SYSFS (a test fixture, as the gateway's) or /sys. */
const char *api_bond_links_root(void);

/* Checks desired (a valid BondDesired object, api_bond_check()) against cur and fills res:
 * API_BOND_OK with steps and files, or a refusal with its field and message. */
void api_bond_plan(const struct api_bond_ctx *ctx, const json_t *desired, const json_t *cur,
		   struct api_bond_result *res);

/* Plans, and unless dry_run writes the files and runs the steps (undone on failure). */
void api_bond_apply(const struct api_bond_ctx *ctx, const json_t *desired, bool dry_run,
		    struct api_bond_result *res);
void api_bond_result_fini(struct api_bond_result *res);

/* The networkd file names for a bond and one of its slaves. */
int api_bond_netdev_path(char *buf, size_t len, const char *dir, const char *bond);
int api_bond_network_path(char *buf, size_t len, const char *dir, const char *bond,
			  const char *slave);

#endif

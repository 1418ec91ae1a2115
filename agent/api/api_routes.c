// SPDX-License-Identifier: MIT
/*
 * Every endpoint of the API, in one table: method, path, role, handler and what the OpenAPI
 * document says about it. Adding an endpoint is adding a line here (and its handler).
 */
#include "api_agent.h"
#include "api_r.h"

#define R(m, p, role, fn, fl, st, tag, sum, body, res, q) \
	{ m, API_PREFIX p, role, fn, fl, st, tag, sum, body, res, q }

const struct api_route api_routes[] = {
	R("GET", "/health", API_ROLE_NONE, api_h_health, 0, 200, "system",
	  "Agent and gateway health (no token needed)", NULL, "Health", NULL),
	R("GET", "/version", API_ROLE_READ, api_h_version, 0, 200, "system",
	  "Agent version and API version", NULL, "Version", NULL),
	R("GET", "/openapi.json", API_ROLE_NONE, api_h_openapi, 0, 200, "system",
	  "This document", NULL, NULL, NULL),
	R("GET", "/events", API_ROLE_READ, api_h_events, API_RF_TEXT, 200, "system",
	  "Server-sent events: config, gateway, apply, session", NULL, NULL, NULL),
	R("GET", "/cluster", API_ROLE_READ, api_h_cluster, 0, 200, "system",
	  "Cluster members, port groups and LU owners (404 without --store etcd)", NULL, NULL,
	  NULL),

	R("GET", "/targets", API_ROLE_READ, api_h_targets_list, 0, 200, "targets",
	  "List targets (secrets masked)", NULL, "TargetList", NULL),
	R("POST", "/targets", API_ROLE_ADMIN, api_h_target_create, API_RF_WRITE, 201, "targets",
	  "Create a target (portals default to every portal)", "Target", "Target", NULL),
	R("GET", "/targets/{target}", API_ROLE_READ, api_h_target_get, 0, 200, "targets",
	  "Show a target with its LUNs and ACLs", NULL, "Target", NULL),
	R("PUT", "/targets/{target}", API_ROLE_ADMIN, api_h_target_put, API_RF_WRITE, 200,
	  "targets", "Replace a target's settings (luns and initiators kept when absent)",
	  "Target", "Target", NULL),
	R("DELETE", "/targets/{target}", API_ROLE_ADMIN, api_h_target_delete, API_RF_WRITE, 204,
	  "targets", "Delete a target, its LUNs and ACLs (its sessions end)", NULL, NULL, NULL),

	R("GET", "/targets/{target}/luns", API_ROLE_READ, api_h_luns_list, 0, 200, "luns",
	  "List a target's LUNs", NULL, "LunList", NULL),
	R("POST", "/targets/{target}/luns", API_ROLE_ADMIN, api_h_lun_create, API_RF_WRITE, 201,
	  "luns", "Add a LUN with its backstore (lun defaults to the lowest free number)", "Lun",
	  "Lun", NULL),
	R("GET", "/targets/{target}/luns/{lun}", API_ROLE_READ, api_h_lun_get, 0, 200, "luns",
	  "Show a LUN", NULL, "Lun", NULL),
	R("PUT", "/targets/{target}/luns/{lun}", API_ROLE_ADMIN, api_h_lun_put, API_RF_WRITE, 200,
	  "luns", "Replace a LUN's settings", "Lun", "Lun", NULL),
	R("POST", "/targets/{target}/luns/{lun}/resize", API_ROLE_ADMIN, api_h_lun_resize,
	  API_RF_WRITE, 200, "luns", "Resize a LUN in service: its sessions, commands and "
	  "reservations stay, hosts get CAPACITY DATA HAS CHANGED; without size, a block device or "
	  "file grown from outside is measured again; smaller only with force", "LunResize",
	  "Lun", NULL),
	R("DELETE", "/targets/{target}/luns/{lun}", API_ROLE_ADMIN, api_h_lun_delete,
	  API_RF_WRITE, 204, "luns", "Remove a LUN", NULL, NULL, NULL),

	R("GET", "/targets/{target}/acls", API_ROLE_READ, api_h_acls_list, 0, 200, "acls",
	  "List the initiators admitted to a target (CHAP secrets masked)", NULL, "AclList",
	  NULL),
	R("POST", "/targets/{target}/acls", API_ROLE_ADMIN, api_h_acl_create, API_RF_WRITE, 201,
	  "acls", "Admit an initiator, optionally with CHAP / mutual CHAP", "Acl", "Acl", NULL),
	R("GET", "/targets/{target}/acls/{initiator}", API_ROLE_READ, api_h_acl_get, 0, 200,
	  "acls", "Show one ACL", NULL, "Acl", NULL),
	R("PUT", "/targets/{target}/acls/{initiator}", API_ROLE_ADMIN, api_h_acl_put, API_RF_WRITE,
	  200, "acls", "Replace an ACL (\"****\" keeps a secret)", "Acl", "Acl", NULL),
	R("DELETE", "/targets/{target}/acls/{initiator}", API_ROLE_ADMIN, api_h_acl_delete,
	  API_RF_WRITE, 204, "acls", "Remove an ACL (the initiator's sessions end)", NULL, NULL,
	  NULL),

	R("GET", "/portals", API_ROLE_READ, api_h_portals_list, 0, 200, "portals",
	  "List portals", NULL, "PortalList", NULL),
	R("POST", "/portals", API_ROLE_ADMIN, api_h_portal_create, API_RF_WRITE, 201, "portals",
	  "Create a portal", "Portal", "Portal", NULL),
	R("GET", "/portals/{portal}", API_ROLE_READ, api_h_portal_get, 0, 200, "portals",
	  "Show a portal", NULL, "Portal", NULL),
	R("PUT", "/portals/{portal}", API_ROLE_ADMIN, api_h_portal_put, API_RF_WRITE, 200,
	  "portals", "Replace a portal", "Portal", "Portal", NULL),
	R("DELETE", "/portals/{portal}", API_ROLE_ADMIN, api_h_portal_delete, API_RF_WRITE, 204,
	  "portals", "Delete a portal no target uses (409 in_use otherwise)", NULL, NULL, NULL),

	R("GET", "/discovery", API_ROLE_READ, api_h_discovery_get, 0, 200, "discovery",
	  "Discovery authentication (secrets masked)", NULL, "Discovery", NULL),
	R("PUT", "/discovery", API_ROLE_ADMIN, api_h_discovery_put, API_RF_WRITE, 200,
	  "discovery", "Set discovery authentication", "Discovery", "Discovery", NULL),

	R("GET", "/sessions", API_ROLE_READ, api_h_sessions_list, API_RF_GATEWAY, 200,
	  "sessions", "Live iSCSI sessions (503 when the gateway is unreachable)", NULL,
	  "SessionList", NULL),
	R("DELETE", "/sessions/{tsih}", API_ROLE_ADMIN, api_h_session_drop, API_RF_GATEWAY, 204,
	  "sessions", "Drop one session (the initiator may log in again)", NULL, NULL, NULL),

	R("GET", "/config", API_ROLE_READ, api_h_config_get, 0, 200, "config",
	  "Export the desired configuration (secrets masked; ETag is the generation)", NULL,
	  "Config", NULL),
	R("PUT", "/config", API_ROLE_ADMIN, api_h_config_put, API_RF_WRITE, 200, "config",
	  "Import a whole configuration; ?dry_run=true only validates, reporting every error",
	  "Config", "Config", "dry_run:validate only, change nothing"),
	R("POST", "/config/validate", API_ROLE_READ, api_h_config_validate, 0, 200, "config",
	  "Validate a configuration without storing it (every error at once)", "Config",
	  "Validation", NULL),

	R("GET", "/bonds", API_ROLE_READ, api_h_bonds_list, 0, 200, "network",
	  "Bonds from the gateway's network model, its verdicts, desired settings and drift",
	  NULL, "BondList", NULL),
	R("GET", "/bonds/{bond}", API_ROLE_READ, api_h_bond_get, 0, 200, "network",
	  "One bond: slaves, active slave, link failures, desired settings and drift", NULL,
	  "Bond", NULL),
	R("PUT", "/bonds/{bond}", API_ROLE_ADMIN, api_h_bond_put, 0, 200, "network",
	  "Store a bond's desired settings; ?apply=true also builds or corrects the bond and "
	  "writes its systemd-networkd files (docs/NETWORK.md)", "BondDesired", "Bond",
	  "apply:create or correct the bond on the host (netlink) and write its networkd files;"
	  "dry_run:return the ordered steps and the files, change nothing;"
	  "force:apply even while TCP sessions run over the bond"),
	R("DELETE", "/bonds/{bond}", API_ROLE_ADMIN, api_h_bond_delete, 0, 204, "network",
	  "Forget a bond's desired settings", NULL, NULL, NULL),
	R("GET", "/rdma", API_ROLE_READ, api_h_rdma_list, 0, 200, "network",
	  "RDMA devices, their ports' state and the netdev each sits on", NULL, "RdmaList",
	  NULL),

	{ "GET", "/metrics", API_ROLE_READ, api_h_metrics, API_RF_TEXT, 200, "system",
	  "Prometheus metrics (isergw_ prefix)", NULL, NULL, NULL },
	{ .method = NULL },
};

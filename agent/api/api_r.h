/* SPDX-License-Identifier: MIT */
/* The route handlers (api_r_*.c), for the route table (api_routes.c) only. */
#ifndef API_R_H
#define API_R_H

#include "api_http.h"

int api_h_health(struct api_req *r);
int api_h_version(struct api_req *r);
int api_h_openapi(struct api_req *r);
int api_h_metrics(struct api_req *r);
int api_h_events(struct api_req *r);
int api_h_targets_list(struct api_req *r);
int api_h_target_create(struct api_req *r);
int api_h_target_get(struct api_req *r);
int api_h_target_put(struct api_req *r);
int api_h_target_delete(struct api_req *r);
int api_h_luns_list(struct api_req *r);
int api_h_lun_create(struct api_req *r);
int api_h_lun_get(struct api_req *r);
int api_h_lun_put(struct api_req *r);
int api_h_lun_delete(struct api_req *r);
int api_h_lun_resize(struct api_req *r);
int api_h_acls_list(struct api_req *r);
int api_h_acl_create(struct api_req *r);
int api_h_acl_get(struct api_req *r);
int api_h_acl_put(struct api_req *r);
int api_h_acl_delete(struct api_req *r);
int api_h_portals_list(struct api_req *r);
int api_h_portal_create(struct api_req *r);
int api_h_portal_get(struct api_req *r);
int api_h_portal_put(struct api_req *r);
int api_h_portal_delete(struct api_req *r);
int api_h_discovery_get(struct api_req *r);
int api_h_discovery_put(struct api_req *r);
int api_h_sessions_list(struct api_req *r);
int api_h_session_drop(struct api_req *r);
int api_h_config_get(struct api_req *r);
int api_h_config_put(struct api_req *r);
int api_h_config_validate(struct api_req *r);
int api_h_bonds_list(struct api_req *r);
int api_h_bond_get(struct api_req *r);
int api_h_bond_put(struct api_req *r);
int api_h_bond_delete(struct api_req *r);
/* ?apply=true / ?dry_run=true of PUT /bonds/{bond} (api_r_bond.c): 1 when it replied (a dry
 * run, a refusal, a failure), 0 to go on storing desired; *applied: what an apply did. */
int api_bond_put_apply(struct api_req *r, const json_t *desired, json_t **applied);
int api_h_rdma_list(struct api_req *r);
int api_h_cluster(struct api_req *r);

#endif

# shellcheck shell=bash
# One etcd on loopback for the cluster suites (sourced after common.sh and api.sh).
# etcd_start NAME LOG: etcd member NAME, data in $T_DIR/etcd, clients on $ETCD_URL (port
# $ETCD_PORT), peers on $ETCD_PEER; sets ETCD_PID; true once it answers a range request.
etcd_start() {
	t_daemon_start etcd etcd "$2" \
		etcd --name "$1" --data-dir "$T_DIR/etcd" \
		--listen-client-urls "$ETCD_URL" --advertise-client-urls "$ETCD_URL" \
		--listen-peer-urls "http://$T_HOST:$ETCD_PEER" \
		--initial-advertise-peer-urls "http://$T_HOST:$ETCD_PEER" \
		--initial-cluster "$1=http://$T_HOST:$ETCD_PEER"
	ETCD_PID=$T_LAST_PID
	t_wait_port "$ETCD_PID" "$ETCD_PORT" 20 &&
		wait_for 20 curl -sf -X POST "$ETCD_URL/v3/kv/range" -d '{"key":"AA=="}'
}

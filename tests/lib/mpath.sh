# tests/lib/mpath.sh: network namespaces with tgtd back ends, for the multipath suite
# (tests/integration/test_mpath.sh) and its benchmark (tests/bench/mpath.sh). Sourced after
# tests/lib/common.sh. The caller sets NS_GW (the gateway's namespace) and SFX (a suffix that
# keeps interface names apart from other runs), creates NS_GW itself and adds it to NS_MADE,
# and calls mp_cleanup_ns from its EXIT trap.

NS_MADE=()

mp_cleanup_ns() {
	local ns
	for ns in "${NS_MADE[@]}"; do
		ip netns del "$ns" 2>/dev/null
	done
	NS_MADE=()
}

# mp_ns_pair SUITE GW-IF GW-ADDR B-IF B-ADDR: the namespaces NS_GW and NS_B (loopback up in
# both) and a veth between them; the ones a killed run of SUITE left go first (t_ns_reap, by
# the names' prefixes). Skips SUITE where namespaces cannot be made, fails it where the link
# cannot; either way the suite ends there.
mp_ns_pair() {
	local suite=$1
	t_ns_reap "${NS_GW%"$SFX"}" "${NS_B%"$SFX"}"
	if ! ip netns add "$NS_GW" 2>/dev/null; then
		skip "$suite" "cannot create network namespaces here"
		t_end
	fi
	NS_MADE+=("$NS_GW")
	{
		ip netns add "$NS_B" && NS_MADE+=("$NS_B") &&
			ip -n "$NS_B" link set lo up && ip -n "$NS_GW" link set lo up &&
			mp_link "$2" "$3" "$NS_B" "$4" "$5"
	} >"$T_DIR/net.log" 2>&1 || {
		fail network "$(tail -n 3 "$T_DIR/net.log" | tr '\n' ' ')"
		t_end
	}
}

# mp_link GW-IF GW-ADDR NS NS-IF NS-ADDR...: a veth pair between ns GW and NS.
mp_link() {
	local gif=$1 gaddr=$2 ns=$3 nif=$4 a
	shift 4
	ip link add "$gif$SFX" netns "$NS_GW" type veth peer name "$nif$SFX" netns "$ns" || return 1
	ip -n "$NS_GW" addr add "$gaddr/24" dev "$gif$SFX" || return 1
	ip -n "$NS_GW" link set "$gif$SFX" up || return 1
	for a in "$@"; do
		ip -n "$ns" addr add "$a/24" dev "$nif$SFX" || return 1
	done
	ip -n "$ns" link set "$nif$SFX" up
}

# mp_tgtd NAME NS IQN BACKING SCSI_ID PORTAL...: a tgtd in NS serving BACKING as LUN 1; its
# PID is in MP_LAST_TGT.
mp_tgtd() {
	local name=$1 ns=$2 iqn=$3 backing=$4 sid=$5 ctl p i
	shift 5
	t_tgt_instance 2000 || return 1
	ctl=$T_TGT_N
	t_daemon_start "tgtd-$name" tgtd "$T_DIR/tgtd-$name.log" \
		ip netns exec "$ns" tgtd -f -C "$ctl" --iscsi "portal=$1"
	T_PID_CTL[$T_LAST_PID]=$ctl
	MP_LAST_TGT=$T_LAST_PID
	for i in $(seq 1 50); do
		timeout 5 tgtadm -C "$ctl" --op show --mode sys >/dev/null 2>&1 && break
		sleep 0.1
	done
	{
		shift
		for p in "$@"; do
			tgtadm_at "$ctl" --op new --mode portal --param "portal=$p" || return 1
		done
		tgtadm_at "$ctl" --op new --mode target --tid 1 -T "$iqn" &&
			tgtadm_at "$ctl" --op new --mode logicalunit --tid 1 --lun 1 -b "$backing" &&
			tgtadm_at "$ctl" --op update --mode logicalunit --tid 1 --lun 1 \
				--params "scsi_id=$sid,scsi_sn=$sid" &&
			tgtadm_at "$ctl" --op bind --mode target --tid 1 -I ALL
	} >>"$T_DIR/tgtadm-$name.log" 2>&1
}

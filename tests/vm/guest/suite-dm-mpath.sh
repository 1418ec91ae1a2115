#!/bin/bash
# dm-mpath: the gateway serving a block backstore that is a dm-multipath map, and showing the
# map as multipathd sees it. tgtd serves one LUN on two guest addresses; the kernel initiator
# logs in through both (two sessions, two sd disks with one WWID); multipathd builds a map over
# them, configured with no_path_retry queue so the gateway has something to warn about. isergwd
# serves /dev/mapper/MAP as a block backstore; its control socket must show the map, both paths
# up and the hang warning, and the warning must be in its log. Then one path goes silent (its
# address removed) during I/O through the gateway: the I/O completes, the path shows down in the
# gateway's status; when the address returns, it shows up again. multipathd's own "show maps json" is
# kept in the logs (the unit test's sample follows its layout).
# shellcheck source=tests/vm/guest/lib.sh
. "$(dirname "$0")/lib.sh"
vm_begin dm-mpath

A1=10.200.6.1
A2=10.200.6.2
GW_ADDR=10.200.6.10
IQN=iqn.2026-11.org.isergw:vm-mpath-be
GW_IQN=iqn.2026-11.org.isergw:vm-mpath-gw
CTL=58
SOCK=$VM_WORK/ctl.sock
UDEVD=/lib/systemd/systemd-udevd

if ! vm_need iscsiadm iscsid tgtd tgtadm multipathd multipath dmsetup jq python3 "$UDEVD"; then
	skip all "$VM_MISSING is not installed (open-iscsi, tgt, multipath-tools, jq, udev)"
	vm_end
fi
if ! vm_modprobe dm_multipath dm_service_time dm_round_robin dummy; then
	fail modules "modprobe $VM_MISSING failed"
	vm_end
fi

run ip link add mp0 type dummy && vm_on_exit "ip link del mp0 2>/dev/null"
run ip link set mp0 up
for a in "$A1" "$A2" "$GW_ADDR"; do
	run ip addr add "$a/24" dev mp0
done

# ---- the back end: tgtd on two portals ----------------------------------------------------

TGT_PID=
tgt_stop() {
	[ -n "$TGT_PID" ] || return 0
	timeout 20 tgtadm -C "$CTL" --op delete --force --mode target --tid 1 >/dev/null 2>&1
	timeout 10 tgtadm -C "$CTL" --op delete --mode system >/dev/null 2>&1
	timeout 10 tail --pid="$TGT_PID" -f /dev/null
	kill -KILL "$TGT_PID" 2>/dev/null
	wait "$TGT_PID" 2>/dev/null
	TGT_PID=
}

tgt_start() {
	local img=$VM_WORK/be.img
	truncate -s 128M "$img" || return 1
	tgtd -f -C "$CTL" --iscsi "portal=$A1:3260" >"$VM_WORK/tgtd.log" 2>&1 &
	TGT_PID=$!
	vm_on_exit tgt_stop
	for _ in $(seq 1 50); do
		timeout 5 tgtadm -C "$CTL" --op show --mode sys >/dev/null 2>&1 && break
		sleep 0.2
	done
	timeout 20 tgtadm -C "$CTL" --lld iscsi --op new --mode portal --param "portal=$A2:3260" &&
		timeout 20 tgtadm -C "$CTL" --lld iscsi --op new --mode target --tid 1 -T "$IQN" &&
		timeout 20 tgtadm -C "$CTL" --lld iscsi --op new --mode logicalunit --tid 1 --lun 1 \
			-b "$img" &&
		timeout 20 tgtadm -C "$CTL" --lld iscsi --op update --mode logicalunit --tid 1 \
			--lun 1 --params "scsi_id=vm-mpath-0001,scsi_sn=vm-mpath-0001" &&
		timeout 20 tgtadm -C "$CTL" --lld iscsi --op bind --mode target --tid 1 -I ALL
}

if ! check tgtd tgt_start; then
	vm_end
fi

# ---- the host side: udev, two sessions, multipathd ----------------------------------------

mpd_start() {
	cat >/etc/multipath.conf <<-EOF
		defaults {
		    user_friendly_names yes
		    find_multipaths no
		    polling_interval 2
		    no_path_retry queue
		}
	EOF
	vm_mpathd_start
}

sessions() {
	vm_mpath_sessions "$IQN" "$A1" "$A2" || return 1
	timeout 30 udevadm settle -t 20
}

if ! check udevd vm_udevd_start || ! check iscsid vm_iscsid_start || ! check sessions sessions ||
	! check multipathd mpd_start; then
	vm_end
fi
SD1=$(vm_disk_of "$A1")
SD2=$(vm_disk_of "$A2")
VM_TMO=60 run multipath -v2
MAP=
for _ in $(seq 1 60); do
	MAP=$(timeout 10 dmsetup ls --target multipath 2>/dev/null | awk '{ print $1; exit }')
	[ -n "$MAP" ] && [ -b "/dev/mapper/$MAP" ] && break
	sleep 0.5
done
VM_TMO=20 run multipath -ll
timeout 20 multipathd show maps json >"$VM_WORK/maps.json" 2>&1
mkdir -p "$VM_SHARE/logs/dm-mpath"
cp "$VM_WORK/maps.json" "$VM_SHARE/logs/dm-mpath/multipathd-show-maps.json" 2>/dev/null
n=$(jq '[.maps[].path_groups[].paths[]] | length' "$VM_WORK/maps.json" 2>/dev/null)
if [ -n "$MAP" ] && [ "${n:-0}" -ge 2 ]; then
	pass map "$MAP over $SD1 and $SD2 ($n paths in multipathd show maps json)"
else
	fail map "map '$MAP', ${n:-no} paths: $(head -c 300 "$VM_WORK/maps.json")"
	vm_end
fi

# ---- the gateway on the map ---------------------------------------------------------------

cat >"$VM_WORK/isergwd.json" <<EOF
{ "gateway": { "control_socket": "$SOCK" },
  "portals": [ { "name": "tcp0", "transport": "tcp", "address": "$GW_ADDR", "port": 3260 } ],
  "targets": [ { "name": "$GW_IQN", "portals": ["tcp0"], "allow_any_initiator": true,
    "luns": [ { "lun": 0, "backstore": { "type": "block", "path": "/dev/mapper/$MAP",
      "block_size": 512 } } ] } ] }
EOF
if ! check gateway-start vm_gw_start "$VM_WORK/isergwd.json" "$VM_WORK/isergwd.log" "$GW_ADDR" 3260
then
	vm_end
fi

# status: the LUN's status from the control socket, into $VM_WORK/status.json.
status() {
	vm_ctl_state >"$VM_WORK/state.json" 2>/dev/null
	jq '.targets[0].luns[0].status' "$VM_WORK/state.json" >"$VM_WORK/status.json" 2>/dev/null
}

# status_holds FILTER: the status, asked now, passes the jq filter.
status_holds() {
	status
	jq -e "$1" "$VM_WORK/status.json" >/dev/null 2>&1
}

# wait_status SECONDS FILTER: until the status passes the jq filter (multipathd is asked every
# 5 s, and checks its paths every 2 s).
wait_status() {
	t_wait_for "$1" status_holds "$2" && return 0
	echo "status: $(jq -c . "$VM_WORK/status.json" 2>/dev/null | cut -c1-600)"
	return 1
}

if wait_status 20 ".type == \"dm-multipath\" and .map == \"$MAP\" and .multipathd == \"ok\"
		and .state == \"ready\" and ([.paths[] | select(.up)] | length) == 2"; then
	pass status "map $MAP, paths $(jq -c '[.paths[] | [.dev, .dm_st, .chk_st]]' \
		"$VM_WORK/status.json"), features '$(jq -r .features "$VM_WORK/status.json")'"
else
	fail status "$(jq -c . "$VM_WORK/status.json" 2>/dev/null | cut -c1-300)"
fi
if jq -e '.warning | test("queue_if_no_path")' "$VM_WORK/status.json" >/dev/null 2>&1 &&
	grep -q "queue_if_no_path without a no_path_retry limit" "$VM_WORK/isergwd.log"; then
	pass hang-warning "no_path_retry queue: warned in the status and the log"
else
	fail hang-warning "status warning '$(jq -r .warning "$VM_WORK/status.json" 2>/dev/null)'," \
		"log: $(grep -c queue_if_no_path "$VM_WORK/isergwd.log") lines"
fi

# I/O from a host through the gateway onto the map: isergw-verify over iSCSI/TCP. verify N SEED
# [-V]: every run has its own seed, so its blocks differ from those of the run before (another
# seed in each header and in the pattern): a write lost during the cut cannot read back right
# from what the previous run left there. -V replays SEED's layout and only reads.
verify() {
	"$VM_BUILD/tests/tools/isergw-verify" -q -n "$1" -s "$2" ${3:+"$3"} -m 256K -S 64M \
		"iscsi://$GW_ADDR:3260/$GW_IQN/0"
}

check io verify 120 1

# The path through A2 goes silent: its address leaves the guest, so what is sent to it is
# dropped. open-iscsi notices, fails the path's I/O after replacement_timeout, multipathd marks
# it failed, and the gateway's status follows at its next query.
run ip addr del "$A2/24" dev mp0
check io-path-cut verify 120 2
if wait_status 45 "(.paths[] | select(.dev == \"$SD2\") | .up) == false and
		(.paths[] | select(.dev == \"$SD1\") | .up) == true and .state == \"degraded\""; then
	pass path-failed "$SD2 shows $(jq -c ".paths[] | select(.dev == \"$SD2\") |
		[.state, .dm_st, .chk_st]" "$VM_WORK/status.json"), map degraded"
else
	fail path-failed "$(jq -c . "$VM_WORK/status.json" 2>/dev/null | cut -c1-300)"
fi
run ip addr add "$A2/24" dev mp0
if wait_status 60 '.state == "ready" and ([.paths[] | select(.up)] | length) == 2'; then
	pass path-reinstated "both paths up again"
else
	fail path-reinstated "$(jq -c . "$VM_WORK/status.json" 2>/dev/null | cut -c1-300)"
fi
# What was written across the cut (seed 2) is all there, read through both paths again.
check io-after-cut-replay verify 120 2 -V

if vm_gw_stop; then
	pass gateway-stop "$VM_GW_STOP"
else
	fail gateway-stop "$VM_GW_STOP; log: $(tail -n 3 "$VM_WORK/isergwd.log")"
fi
vm_end

#!/bin/bash
# test_durability: an acknowledged write survives kill -9 of the gateway, and reached the disk.
#
# For each backstore (a file on a real file system, a block device: a loop device over such a
# file, and a remote LUN on tgtd whose backing file is on the same file system), a client
# (tests/tools/isergw-durable) writes fresh blocks
#   - with FUA on every WRITE(16),
#   - without FUA, then SYNCHRONIZE CACHE(10),
#   - without FUA or sync to a LUN with "write_cache": false (which reports WCE=0),
#   - (remote) WRITE SAME(16) of zeroes to that LUN,
#   - without FUA or sync after the host turned WCE off with MODE SELECT,
# holds its session open, and the gateway is killed with SIGKILL as soon as the client prints
# what was acknowledged. The gateway is started again and the blocks are read back through it.
#
# A process kill leaves the kernel's page cache alone, so reading back alone would pass even if
# the data never left it. So each case also asks the file system whether the acknowledged range
# is on disk: FIEMAP (filefrag -v) of the backing file must show it allocated and written, not
# delayed allocation (ext4 and xfs keep written-back-pending blocks as "delalloc"), a hole or
# unwritten. A control write without FUA or sync, on a LUN with the write cache on, must still
# show as not on disk: it proves the probe can see the difference (what the write-cache
# setting allows to be lost). docs/RELIABILITY.md, "Durability".
#
#   tests/integration/test_durability.sh        (BUILD=build|build/san; gateway only)
set -u
. "$(dirname "$0")/../lib/common.sh"

t_begin durability
if [ "$TARGET" != isergwd ]; then
	skip durability "gateway only (it kills and restarts the gateway)"
	t_end
fi
TOOL=$T_TOOLS/isergw-durable
if ! t_need "$TOOL" filefrag; then
	fail durability "needs $TOOL (make test-build) and filefrag (e2fsprogs)"
	t_end
fi

# The images live on the build tree's file system, not tmpfs (no page cache to write back).
DUR=$(mktemp -d "$T_BUILD/durability.XXXXXX") || exit 1
FSTYPE=$(stat -f -c %T "$DUR")
case "$FSTYPE" in
tmpfs | ramfs)
	fail durability "$DUR is on $FSTYPE: the test needs a real file system"
	rm -rf "$DUR"
	t_end
	;;
esac
t_log "durability: images in $DUR ($FSTYPE)"
LOOPDEV=
dur_cleanup() {
	[ -n "$LOOPDEV" ] && losetup -d "$LOOPDEV" 2>/dev/null
	rm -rf "$DUR"
}
trap 'rc=$?; dur_cleanup; (exit $rc); t_exit_trap' EXIT

IQN=iqn.2026-11.org.isergw:durability
SIZE=64M
BLOCKS=64			# 32 KiB per case
REGION=2048			# cases 1 MiB apart: each writes blocks nobody wrote before

# dur_config FILE PORT WRITE_CACHE BACKSTORE-JSON
dur_config() {
	cat >"$1" <<EOF
{
  "gateway": { },
  "portals": [ { "name": "tcp0", "transport": "tcp", "address": "$T_HOST", "port": $2 } ],
  "targets": [ { "name": "$IQN", "tpgt": 1, "portals": ["tcp0"], "allow_any_initiator": true,
    "luns": [ { "lun": 0, "write_cache": $3, "backstore": $4 } ] } ]
}
EOF
}

# dur_start KIND WRITE_CACHE: the gateway on the current backstore; waits until the LUN reads.
dur_start() {
	N_START=$((N_START + 1))
	dur_config "$T_DIR/$1.$N_START.json" "$PORT" "$2" "$BS_JSON"
	if ! gw_start "$T_DIR/$1.$N_START.json" "$T_DIR/$1.$N_START.isergwd.log" "$PORT"; then
		fail "$1: gateway start" "see $T_DIR/$1.$N_START.isergwd.log"
		return 1
	fi
	URL=iscsi://$T_HOST:$PORT/$IQN/0
	# A remote LUN is NOT READY until its path has logged in.
	t_wait_for 10 timeout -k 5 10 iscsi-readcapacity16 "$URL" >/dev/null 2>&1 && return 0
	fail "$1: LUN ready" "READ CAPACITY still failing after 10 s"
	return 1
}

# dur_kill: SIGKILL, reaped; no stop check (it was killed on purpose).
dur_kill() {
	kill -KILL "$T_GW_PID" 2>/dev/null
	wait "$T_GW_PID" 2>/dev/null
	t_forget "$T_GW_PID"
}

# dur_on_disk FILE LBA BLOCKS: every file-system block of the 512-byte LBAs is in a FIEMAP
# extent that is allocated and written (no delalloc, unknown_loc or unwritten flag).
dur_on_disk() {
	local file=$1 lba=$2 n=$3 fsb first last
	fsb=$(stat -f -c %S "$file")
	first=$((lba * 512 / fsb))
	last=$(((lba + n) * 512 / fsb - 1))
	filefrag -v "$file" 2>/dev/null | awk -v a="$first" -v b="$last" '
		/^ *[0-9]+:/ {
			split($0, f, ":")
			split(f[2], r, "\\.\\.")
			s = r[1] + 0; e = r[2] + 0
			bad = ($0 ~ /delalloc|unknown_loc|unwritten/)
			for (i = (s > a ? s : a); i <= (e < b ? e : b); i++)
				ok[i] = !bad
		}
		END {
			for (i = a; i <= b; i++)
				if (!ok[i]) { print "block " i " not on disk"; exit 1 }
		}'
}

# dur_write KIND CASE MODE LBA GEN: the client writes and holds; SIGKILL after its "acked".
dur_write() {
	local kind=$1 name=$2 mode=$3 lba=$4 gen=$5 out i tpid
	out=$T_DIR/$kind.$name.write.out
	rm -f "$T_DIR/hold"
	mkfifo "$T_DIR/hold"
	"$TOOL" write -H -m "$mode" -l "$lba" -n "$BLOCKS" -g "$gen" "$URL" <"$T_DIR/hold" \
		>"$out" 2>&1 &
	tpid=$!
	exec 7>"$T_DIR/hold"
	for i in $(seq 1 3000); do
		grep -q '^acked' "$out" && break
		t_alive "$tpid" || break
		sleep 0.01
	done
	if ! grep -q '^acked' "$out"; then
		exec 7>&-
		wait "$tpid"
		fail "$kind: $name: write acknowledged" "exit $?: $(tail -n 3 "$out" | tr '\n' ' ')"
		return 1
	fi
	dur_kill
	exec 7>&-
	wait "$tpid"
	return 0
}

# dur_case KIND NAME MODE LBA GEN IMAGE: write, kill, probe the image, restart, read back.
dur_case() {
	local kind=$1 name=$2 mode=$3 lba=$4 gen=$5 img=$6 wc=${7:-true} why
	if ! dur_write "$kind" "$name" "$mode" "$lba" "$gen"; then
		dur_kill
		dur_start "$kind" "$wc"
		return
	fi
	if why=$(dur_on_disk "$img" "$lba" "$BLOCKS"); then
		pass "$kind: $name: acknowledged blocks are on disk (FIEMAP of $(basename "$img"))"
	else
		fail "$kind: $name: acknowledged blocks on disk" "$why"
	fi
	dur_start "$kind" "$wc" || return
	check "$kind: $name: $BLOCKS blocks read back after kill -9 and restart" \
		"$TOOL" verify -l "$lba" -n "$BLOCKS" -g "$gen" "$URL"
}

# dur_control KIND IMAGE: a plain write to a write-cache LUN is acknowledged before it is on
# disk (so the probe above can tell). Writeback may catch one in between: three fresh tries.
dur_control() {
	local kind=$1 img=$2 try out
	for try in 0 1 2; do
		out=$T_DIR/$kind.control.$try.out
		if ! "$TOOL" write -m plain -l $((REGION * (8 + try))) -n "$BLOCKS" -g 99 "$URL" \
			>"$out" 2>&1; then
			fail "$kind: control write" "$(tail -n 2 "$out" | tr '\n' ' ')"
			return
		fi
		if ! dur_on_disk "$img" $((REGION * (8 + try))) "$BLOCKS" >/dev/null; then
			pass "$kind: control: a plain write with the write cache on is acknowledged before it is on disk (the probe sees the difference)"
			return
		fi
	done
	fail "$kind: control" "3 plain writes were all on disk at once: the probe proves nothing here"
}

# dur_kind KIND IMAGE: the four cases against the current backstore ($BS_JSON).
dur_kind() {
	local kind=$1 img=$2 out
	PORT=$(t_free_port) || { fail "$kind" "no free port"; return; }
	dur_start "$kind" true || return
	out=$T_DIR/$kind.wce.out
	if "$TOOL" wce "$URL" >"$out" 2>&1 && grep -qx 'wce 1' "$out"; then
		pass "$kind: write_cache true reports WCE=1"
	else
		fail "$kind: WCE=1" "$(tr '\n' ' ' <"$out")"
	fi
	dur_control "$kind" "$img"
	# A host turns the cache off with MODE SELECT: from then on every write is durable.
	if "$TOOL" wce -s 0 "$URL" >"$out" 2>&1 && grep -qx 'wce 0' "$out"; then
		pass "$kind: MODE SELECT turns WCE off"
		dur_case "$kind" "WCE=0 by MODE SELECT, plain write" plain $((REGION * 5)) 15 "$img"
		if "$TOOL" wce "$URL" >"$out" 2>&1 && grep -qx 'wce 1' "$out"; then
			pass "$kind: after a restart WCE is the configured 1 again"
		else
			fail "$kind: WCE after restart" "$(tr '\n' ' ' <"$out")"
		fi
	else
		fail "$kind: MODE SELECT WCE=0" "$(tr '\n' ' ' <"$out")"
	fi
	dur_case "$kind" "FUA write" fua $((REGION * 1)) 11 "$img"
	dur_case "$kind" "write + SYNCHRONIZE CACHE" sync $((REGION * 2)) 12 "$img" false
	# Now running with write_cache false.
	if "$TOOL" wce "$URL" >"$out" 2>&1 && grep -qx 'wce 0' "$out"; then
		pass "$kind: write_cache false reports WCE=0"
	else
		fail "$kind: WCE=0" "$(tr '\n' ' ' <"$out")"
	fi
	dur_case "$kind" "write_cache false, plain write" plain $((REGION * 3)) 13 "$img" false
	# WRITE SAME of zeroes is a write too. Only the remote backstore can be probed: tgtd (a LU
	# that is not thin) writes the zeroes with pwrite into fresh blocks, while a file or block
	# backstore punches a hole or zero-ranges, which FIEMAP shows the same before and after
	# the journal has it.
	[ "$kind" = remote ] &&
		dur_case "$kind" "write_cache false, WRITE SAME of zeroes" wsame $((REGION * 4)) 0 "$img" false
	gw_stop "$T_GW_PID"
}

N_START=0

# 1. File backstore, a file on the build tree's file system.
IMG=$DUR/file.img
truncate -s "$SIZE" "$IMG"
BS_JSON="{ \"type\": \"file\", \"path\": \"$IMG\", \"size\": \"$SIZE\", \"block_size\": 512 }"
dur_kind file "$IMG"

# 2. Block backstore: a loop device over a file there.
IMG=$DUR/block.img
truncate -s "$SIZE" "$IMG"
if LOOPDEV=$(losetup -f --show "$IMG" 2>"$T_DIR/losetup.err"); then
	BS_JSON="{ \"type\": \"block\", \"path\": \"$LOOPDEV\", \"block_size\": 512 }"
	dur_kind block "$IMG"
	losetup -d "$LOOPDEV" && LOOPDEV=
else
	fail "block: loop device" "losetup: $(cat "$T_DIR/losetup.err") (needs root and loop devices)"
	LOOPDEV=
fi

# 3. Remote backstore: tgtd (bs_rdwr, its file on the same file system) as the back end.
IMG=$DUR/remote.img
truncate -s "$SIZE" "$IMG"
TGT_PORT=$(t_free_port)
if ! t_need tgtd tgtadm; then
	fail remote "tgtd is not installed (tgt)"
elif ! tgt_start "$TGT_PORT" "$T_DIR/tgtd.log"; then
	fail "remote: tgtd start" "see $T_DIR/tgtd.log"
else
	BACK_IQN=iqn.2026-11.org.isergw:durability-back
	if tgtadm_c --op new --mode target --tid 1 -T "$BACK_IQN" >"$T_DIR/tgtadm.log" 2>&1 &&
		tgtadm_c --op new --mode logicalunit --tid 1 --lun 1 -b "$IMG" >>"$T_DIR/tgtadm.log" 2>&1 &&
		tgtadm_c --op bind --mode target --tid 1 -I ALL >>"$T_DIR/tgtadm.log" 2>&1; then
		BS_JSON="{ \"type\": \"remote\", \"block_size\": 512, \"login_timeout\": 2,"
		BS_JSON="$BS_JSON \"reconnect_delay_ms\": 200,"
		BS_JSON="$BS_JSON \"paths\": [ { \"url\": \"iscsi://$T_HOST:$TGT_PORT/$BACK_IQN/1\" } ] }"
		dur_kind remote "$IMG"
	else
		fail "remote: tgtadm" "$(tail -n 3 "$T_DIR/tgtadm.log" | tr '\n' ' ')"
	fi
fi

dur_cleanup
t_end

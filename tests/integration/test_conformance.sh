#!/bin/bash
# libiscsi's conformance suite (iscsi-test-cu) against the target, family by family.
#
# Each family (SCSI.Read10, iSCSI.iSCSITMF, LINUX.Unmap, ...) runs in its own iscsi-test-cu
# process, bounded by `timeout`, with -d (data-destructive tests allowed) and never -S (the
# sanitize tests hang the tool). The target is a thin 1 GiB LUN admitting exactly the two
# initiator names the tool uses; the LUN URL is given twice to feed the MultipathIO tests.
# CUnit counts skipped tests as passed, so every test's verdict is read from the verbose log:
# "passed" with a [SKIPPED] line before it is a skip.
#
# The pass criterion: per family, the target passes at least as many tests as tgt 1.0.85 did on
# this machine, as recorded in tests/integration/tgt-baseline.txt (family passed failed skipped).
#
#   tests/integration/test_conformance.sh                 run against TARGET, compare
#   tests/integration/test_conformance.sh --baseline      run against tgtd, rewrite the baseline
#   tests/integration/test_conformance.sh SCSI.Read10 ... only these families
# Environment: TARGET, BUILD; CONF_GROUPS (default "SCSI iSCSI LINUX"); CONF_TIMEOUT seconds
# per family (default 120); CONF_RESTART=0 keeps one target for all families instead of a
# fresh target (and fresh LUN) per family.
set -u
. "$(dirname "$0")/../lib/common.sh"

BASELINE_FILE=$T_ROOT/tests/integration/tgt-baseline.txt
# One gateway per family: count only the stops that fail (crash, hang, sanitizer report).
T_STOP_QUIET=1
CONF_GROUPS=${CONF_GROUPS:-SCSI iSCSI LINUX}
CONF_TIMEOUT=${CONF_TIMEOUT:-120}
CONF_RESTART=${CONF_RESTART:-1}
MODE=compare
FAMILIES=()
for a in "$@"; do
	case "$a" in
	--baseline) MODE=baseline ;;
	-h | --help)
		sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//; /^set -u/d'
		exit 0
		;;
	*) FAMILIES+=("$a") ;;
	esac
done
[ "$MODE" = baseline ] && TARGET=tgtd

t_begin conformance
if ! t_need iscsi-test-cu; then
	skip conformance "iscsi-test-cu (libiscsi-bin) is not installed"
	t_end
fi

LIST=$T_DIR/list.txt
timeout -k 5 30 iscsi-test-cu --list >"$LIST" 2>/dev/null
if [ ${#FAMILIES[@]} -eq 0 ]; then
	for g in $CONF_GROUPS; do
		while read -r f; do
			FAMILIES+=("$f")
		done < <(grep -E "^$g\\.[^.]+\$" "$LIST")
	done
fi
if [ ${#FAMILIES[@]} -eq 0 ]; then
	fail list "iscsi-test-cu --list gave no families for: $CONF_GROUPS"
	t_end
fi

tg_defaults
TG_SIZE=1G
TG_INITIATORS="$T_INI1 $T_INI2"
# A fresh thin LUN per target start: no state carried from one family to the next.
fresh_target() {
	rm -f "$TG_BACKING"
	target_start "conf.$1" || return 1
}

# parse LOG: prints "passed failed skipped unfinished", and writes the failed tests with their
# first message to LOG.failed, the skipped ones with the reason to LOG.skipped.
parse() {
	awk -v failed="$1.failed" -v skipped="$1.skipped" '
	function flush() {
		if (cur == "")
			return
		if (res == "FAILED") {
			nf++
			print cur ": " (msg == "" ? "(no message)" : msg) > failed
		} else if (res == "passed") {
			if (sk) { ns++; print cur ": " skmsg > skipped } else np++
		} else {
			nu++
			print cur ": did not finish (tool crashed or timed out)" > failed
		}
		cur = ""
	}
	/^Suite: / || /^Run Summary/ { flush(); next }
	/^  Test: / {
		flush()
		line = $0
		sub(/^  Test: /, "", line)
		cur = line
		sub(/ \.\.\..*/, "", cur)
		res = ""; sk = 0; msg = ""; skmsg = ""
		sub(/^[^.]*\.\.\./, "", line)
		$0 = line
	}
	cur != "" {
		if (res == "") {
			if ($0 ~ /^passed/) { res = "passed"; next }
			if ($0 ~ /^FAILED/) { res = "FAILED"; next }
			if (index($0, "[SKIPPED]") && !sk) {
				sk = 1
				skmsg = $0
				sub(/.*\[SKIPPED\] */, "", skmsg)
			}
			if (index($0, "[FAILED]") && msg == "") {
				msg = $0
				sub(/.*\[FAILED\] */, "", msg)
			}
		} else if (res == "FAILED" && msg == "" && $0 ~ /^ +[0-9]+\. /) {
			msg = $0
			sub(/^ +/, "", msg)
		}
	}
	END { flush(); printf "%d %d %d %d\n", np, nf, ns, nu }
	' "$1"
}

declare -A BASE_P=()
if [ "$MODE" = compare ]; then
	if [ -r "$BASELINE_FILE" ]; then
		while read -r f p _ _; do
			case "$f" in "#"* | "") continue ;; esac
			BASE_P[$f]=$p
		done <"$BASELINE_FILE"
	else
		fail baseline "$BASELINE_FILE is missing (run with --baseline)"
	fi
fi

REPORT=$T_DIR/report.md
DETAILS=$T_DIR/failures.txt
: >"$DETAILS"
{
	echo "| family | passed | failed | skipped | seconds | tgt passed |"
	echo "| --- | ---: | ---: | ---: | ---: | ---: |"
} >"$REPORT"
BASE_OUT=$T_DIR/baseline.txt
: >"$BASE_OUT"

tot_p=0 tot_f=0 tot_s=0
start_all=$SECONDS
if [ "$CONF_RESTART" != 1 ] && ! fresh_target all; then
	fail start "$TARGET did not start"
	t_end
fi
for fam in "${FAMILIES[@]}"; do
	if [ "$CONF_RESTART" = 1 ]; then
		if ! fresh_target "$fam"; then
			fail "$fam" "$TARGET did not start"
			continue
		fi
	fi
	log=$T_DIR/$fam.log
	expected=$(grep -c "^$fam\\." "$LIST")
	t0=$SECONDS
	timeout -k 5 "$CONF_TIMEOUT" iscsi-test-cu -d -i "$T_INI1" -I "$T_INI2" -t "$fam" \
		"$T_URL" "$T_URL" >"$log" 2>&1
	rc=$?
	secs=$((SECONDS - t0))
	: >"$log.failed"
	: >"$log.skipped"
	read -r np nf ns nu < <(parse "$log")
	# Tests the tool never reached (it crashed or timed out) count as failed.
	missing=$((expected - np - nf - ns))
	[ "$missing" -lt 0 ] && missing=0
	if [ "$missing" -gt 0 ]; then
		why="$missing of $expected tests did not run"
		case "$rc" in
		124 | 137) why="$why: timed out after ${CONF_TIMEOUT}s" ;;
		*) why="$why: iscsi-test-cu exited with status $rc" ;;
		esac
		echo "$fam: $why; last lines: $(tail -n 2 "$log" | tr '\n' ' ')" >>"$log.failed"
		nf=$((nf + missing))
	elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		# Every test reported, then the tool hung (e.g. reconnecting to a dead target).
		echo "$fam: iscsi-test-cu timed out after ${CONF_TIMEOUT}s after its last test" \
			>>"$log.failed"
		nf=$((nf + 1))
	fi
	tot_p=$((tot_p + np)) tot_f=$((tot_f + nf)) tot_s=$((tot_s + ns))
	base=${BASE_P[$fam]:-}
	echo "| $fam | $np | $nf | $ns | $secs | ${base:--} |" >>"$REPORT"
	echo "$fam $np $nf $ns" >>"$BASE_OUT"
	sed "s/^/$fam./" "$log.failed" | sed "s/^$fam\\.$fam:/$fam:/" >>"$DETAILS"

	if ! t_alive "$T_TARGET_PID"; then
		fail "$fam" "$TARGET died during this family (see $T_DIR)"
		T_TARGET_PID=
		[ "$CONF_RESTART" = 1 ] || fresh_target "after-$fam" || break
		continue
	fi
	if [ "$MODE" = baseline ]; then
		pass "$fam: $np passed, $nf failed, $ns skipped (${secs}s)"
	elif [ -z "$base" ]; then
		if [ "$nf" -eq 0 ]; then
			pass "$fam: $np passed, $ns skipped (no tgt baseline)"
		else
			fail "$fam" "$nf failed (no tgt baseline): $(head -n 3 "$log.failed" | tr '\n' ';')"
		fi
	elif [ "$np" -ge "$base" ]; then
		pass "$fam: $np passed (tgt $base), $nf failed, $ns skipped"
	else
		fail "$fam" "$np passed < tgt's $base ($nf failed, $ns skipped); failing: $(head -n 5 \
			"$log.failed" | tr '\n' ';') skipped: $(head -n 5 "$log.skipped" | tr '\n' ';')"
	fi
	[ "$CONF_RESTART" = 1 ] && target_stop
done
total_secs=$((SECONDS - start_all))
echo "| total | $tot_p | $tot_f | $tot_s | $total_secs | |" >>"$REPORT"

mkdir -p "$T_BUILD"
cp "$REPORT" "$T_BUILD/conformance-$TARGET.md"
cp "$DETAILS" "$T_BUILD/conformance-$TARGET.failures.txt"
t_log ""
cat "$REPORT"
if [ -s "$DETAILS" ]; then
	t_log ""
	t_log "failed tests ($TARGET):"
	sed 's/^/  /' "$DETAILS"
fi
t_log "conformance: table in $T_BUILD/conformance-$TARGET.md, ${total_secs}s in all"

if [ "$MODE" = baseline ]; then
	{
		echo "# iscsi-test-cu (libiscsi $(dpkg-query -W -f='${Version}' libiscsi-bin 2>/dev/null))" \
			"against tgt $(dpkg-query -W -f='${Version}' tgt 2>/dev/null), thin 1 GiB LUN in /dev/shm,"
		echo "# one fresh target per family, -d, no -S. Produced by:"
		echo "#   tests/integration/test_conformance.sh --baseline"
		echo "# family passed failed skipped"
		cat "$BASE_OUT"
	} >"$BASELINE_FILE"
	t_log "conformance: baseline written to $BASELINE_FILE"
fi
t_end

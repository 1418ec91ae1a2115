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
# The pass criterion: the target's own baseline, tests/integration/conformance-baseline.txt for
# the gateway (tgt-baseline.txt for tgtd): per family, fewer passes than recorded, a failing
# test not recorded as failing, tests lost to a crash or timeout, or a dead target fail the
# suite. More passes than recorded pass, and are listed at the end ("rises"): review them and
# rewrite the baseline. A baseline family that iscsi-test-cu no longer lists, a family run
# that the baseline does not have, or another libiscsi-bin version than the baseline's fail.
#
#   tests/integration/test_conformance.sh                  run against TARGET, compare
#   tests/integration/test_conformance.sh --update-baseline run against the gateway
#                                 (CONF_BASELINE_RUNS times, default 2), rewrite its baseline
#   tests/integration/test_conformance.sh --baseline       the same against tgtd, for tgt's
#   tests/integration/test_conformance.sh SCSI.Read10 ...  only these families
# A baseline keeps, per family, the worst of its runs (fewest passes, every test that failed
# once); a family whose figures differ between runs is marked "flaky" in it.
# Environment: TARGET, BUILD; CONF_GROUPS (default "SCSI iSCSI LINUX"); CONF_TIMEOUT seconds
# per family (default 120); CONF_RESTART=0 keeps one target for all families instead of a
# fresh target (and fresh LUN) per family; CONF_BASELINE another baseline file (the suite's own
# checks use it).
set -u
. "$(dirname "$0")/../lib/common.sh"

# One gateway per family: count only the stops that fail (crash, hang, sanitizer report).
T_STOP_QUIET=1
CONF_GROUPS=${CONF_GROUPS:-SCSI iSCSI LINUX}
CONF_TIMEOUT=${CONF_TIMEOUT:-120}
CONF_RESTART=${CONF_RESTART:-1}
CONF_BASELINE_RUNS=${CONF_BASELINE_RUNS:-2}
MODE=compare
FAMILIES=()
for a in "$@"; do
	case "$a" in
	--baseline)
		MODE=baseline
		TARGET=tgtd
		;;
	--update-baseline)
		MODE=baseline
		TARGET=isergwd
		;;
	-h | --help)
		sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//; /^set -u/d'
		exit 0
		;;
	*) FAMILIES+=("$a") ;;
	esac
done
case "$TARGET" in
tgtd) BASELINE_FILE=$T_ROOT/tests/integration/tgt-baseline.txt ;;
*) BASELINE_FILE=$T_ROOT/tests/integration/conformance-baseline.txt ;;
esac
BASELINE_FILE=${CONF_BASELINE:-$BASELINE_FILE}
# The tgt baseline is shown beside the gateway's figures, for the record.
TGT_BASELINE_FILE=$T_ROOT/tests/integration/tgt-baseline.txt
LIBISCSI_VERSION=$(dpkg-query -W -f='${Version}' libiscsi-bin 2>/dev/null)

t_begin conformance
if [ "$MODE" = baseline ] && { [ ${#FAMILIES[@]} -gt 0 ] || [ "$CONF_GROUPS" != "SCSI iSCSI LINUX" ]; }; then
	fail baseline "a baseline is made of every family of SCSI, iSCSI and LINUX: no family names, \
no CONF_GROUPS"
	t_end
fi
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

# parse LOG [FAILED]: prints "passed failed skipped unfinished", and writes the failed tests with
# their first message to FAILED (default LOG.failed), the skipped ones with the reason to
# LOG.skipped.
parse() {
	awk -v failed="${2:-$1.failed}" -v skipped="$1.skipped" '
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

# Baselines: "libiscsi VERSION", "FAMILY PASSED FAILED SKIPPED [flaky]", "fail FAMILY.TEST".
declare -A BASE_P=() BASE_F=() BASE_FLAKY=() BASE_FAILS=() TGT_P=()
BASE_VERSION=
load_baseline() {
	local k f p n _r
	while read -r k f p n _r; do
		case "$k" in
		"#"* | "") continue ;;
		libiscsi) BASE_VERSION=$f ;;
		fail) BASE_FAILS[$f]=1 ;;
		*)
			BASE_P[$k]=$f
			BASE_F[$k]=$p
			[ "$_r" = flaky ] && BASE_FLAKY[$k]=1
			;;
		esac
	done <"$1"
}
if [ -r "$TGT_BASELINE_FILE" ]; then
	while read -r f p _; do
		case "$f" in "#"* | "" | libiscsi | fail) continue ;; esac
		TGT_P[$f]=$p
	done <"$TGT_BASELINE_FILE"
fi
if [ "$MODE" = compare ]; then
	if [ ! -r "$BASELINE_FILE" ]; then
		fail baseline "$BASELINE_FILE is missing (run with --update-baseline, or --baseline for tgtd)"
		t_end
	fi
	load_baseline "$BASELINE_FILE"
	if [ "$BASE_VERSION" != "$LIBISCSI_VERSION" ]; then
		fail "libiscsi version" "libiscsi-bin is ${LIBISCSI_VERSION:-not known to dpkg}, the \
baseline was made with ${BASE_VERSION:-an unrecorded version}: review the new figures and rewrite \
$BASELINE_FILE"
	else
		pass "libiscsi-bin $LIBISCSI_VERSION, as in the baseline"
	fi
	# Every baseline family of the groups run is still in the tool's list.
	gone=
	for f in "${!BASE_P[@]}"; do
		case " $CONF_GROUPS " in *" ${f%%.*} "*) ;; *) continue ;; esac
		grep -qxF "$f" "$LIST" || gone="$gone $f"
	done
	if [ -n "$gone" ]; then
		fail "baseline families" "no longer in iscsi-test-cu --list:$gone"
	fi
fi

REPORT=$T_DIR/report.md
DETAILS=$T_DIR/failures.txt
RISES=$T_DIR/rises.txt
: >"$DETAILS"
: >"$RISES"
{
	echo "| family | passed | failed | skipped | seconds | baseline passed | tgt passed |"
	echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
} >"$REPORT"

# run_family FAM: one iscsi-test-cu process over FAM. Sets NP NF NS SECS, CRASH (why tests were
# lost, or empty) and DIED=1 when the target died; the failed tests, one "FAM.TEST: message" a
# line, are in $log.failed (lost tests as "FAM: why").
run_family() {
	local fam=$1 expected rc missing t0 nu
	log=$T_DIR/$fam.log
	[ -e "$log" ] && log=$T_DIR/$fam.run$RUN.log
	CRASH= DIED=0
	expected=$(grep -c "^$fam\\." "$LIST")
	t0=$SECONDS
	timeout -k 5 "$CONF_TIMEOUT" iscsi-test-cu -d -i "$T_INI1" -I "$T_INI2" -t "$fam" \
		"$T_URL" "$T_URL" >"$log" 2>&1
	rc=$?
	SECS=$((SECONDS - t0))
	: >"$log.failed.raw"
	: >"$log.skipped"
	read -r NP NF NS nu < <(parse "$log" "$log.failed.raw")
	sed "s/^/$fam./" "$log.failed.raw" >"$log.failed"
	# Tests the tool never reached (it crashed or timed out) count as failed.
	missing=$((expected - NP - NF - NS))
	[ "$missing" -lt 0 ] && missing=0
	if [ "$missing" -gt 0 ]; then
		CRASH="$missing of $expected tests did not finish"
		case "$rc" in
		124 | 137) CRASH="$CRASH: timed out after ${CONF_TIMEOUT}s" ;;
		*) CRASH="$CRASH: iscsi-test-cu exited with status $rc" ;;
		esac
		NF=$((NF + missing))
	elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		# Every test reported, then the tool hung (e.g. reconnecting to a dead target).
		CRASH="iscsi-test-cu timed out after ${CONF_TIMEOUT}s after its last test"
		NF=$((NF + 1))
	elif [ "$rc" -gt 128 ]; then
		CRASH="iscsi-test-cu died of signal $((rc - 128)) after its last test"
		NF=$((NF + 1))
	fi
	[ -n "$CRASH" ] && echo "$fam: $CRASH; last lines: $(tail -n 2 "$log" | tr '\n' ' ')" \
		>>"$log.failed"
	t_alive "$T_TARGET_PID" || DIED=1
	return 0
}

# failed_tests FAM: the names of the tests that failed in the last run_family (lost tests, which
# are named by their family alone, are a crash and reported as such).
failed_tests() {
	sed -n 's/^\([^:]*\): .*/\1/p' "$log.failed" | grep -vxF "$1"
}

tot_p=0 tot_f=0 tot_s=0
start_all=$SECONDS
if [ "$CONF_RESTART" != 1 ] && ! fresh_target all; then
	fail start "$TARGET did not start"
	t_end
fi
RUNS=1
[ "$MODE" = baseline ] && RUNS=$CONF_BASELINE_RUNS
declare -A W_P=() W_F=() W_S=() W_FIRST=() W_FLAKY=() W_FAILS=()
for ((RUN = 1; RUN <= RUNS; RUN++)); do
	[ "$RUNS" -gt 1 ] && t_log "conformance: run $RUN of $RUNS against $TARGET"
	for fam in "${FAMILIES[@]}"; do
		if [ "$CONF_RESTART" = 1 ]; then
			if ! fresh_target "$fam"; then
				fail "$fam" "$TARGET did not start"
				continue
			fi
		fi
		run_family "$fam"
		if [ "$RUN" = "$RUNS" ]; then
			tot_p=$((tot_p + NP)) tot_f=$((tot_f + NF)) tot_s=$((tot_s + NS))
			echo "| $fam | $NP | $NF | $NS | $SECS | ${BASE_P[$fam]:--} | ${TGT_P[$fam]:--} |" \
				>>"$REPORT"
			cat "$log.failed" >>"$DETAILS"
		fi
		if [ "$DIED" = 1 ]; then
			fail "$fam" "$TARGET died during this family (see $T_DIR)"
			T_TARGET_PID=
			[ "$CONF_RESTART" = 1 ] || fresh_target "after-$fam" || break
			continue
		fi
		new=$(failed_tests "$fam" |
			while read -r t; do [ -n "${BASE_FAILS[$t]:-}" ] || echo "$t"; done)
		if [ "$MODE" = baseline ]; then
			# The worst of the runs; a difference between runs makes the family flaky.
			if [ -n "$CRASH" ]; then
				fail "$fam" "$CRASH: a baseline is not made of crashes (see $T_DIR)"
			elif [ -z "${W_FIRST[$fam]:-}" ]; then
				W_FIRST[$fam]="$NP $NF $NS"
				W_P[$fam]=$NP W_F[$fam]=$NF W_S[$fam]=$NS
				pass "$fam: $NP passed, $NF failed, $NS skipped (${SECS}s)"
			else
				[ "${W_FIRST[$fam]}" != "$NP $NF $NS" ] && W_FLAKY[$fam]=1
				[ "$NP" -lt "${W_P[$fam]}" ] && W_P[$fam]=$NP
				[ "$NF" -gt "${W_F[$fam]}" ] && W_F[$fam]=$NF
				[ "$NS" -gt "${W_S[$fam]}" ] && W_S[$fam]=$NS
				pass "$fam: $NP passed, $NF failed, $NS skipped (${SECS}s, run $RUN)"
			fi
			for t in $(failed_tests "$fam"); do
				W_FAILS[$t]=1
			done
		elif [ -z "${BASE_P[$fam]:-}" ]; then
			fail "$fam" "not in $BASELINE_FILE ($NP passed, $NF failed, $NS skipped): review \
and rewrite the baseline"
		elif [ -n "$CRASH" ]; then
			fail "$fam" "$CRASH (see $log)"
		elif [ "$NP" -lt "${BASE_P[$fam]}" ] || [ "$NF" -gt "${BASE_F[$fam]}" ] ||
			[ -n "$new" ]; then
			fail "$fam" "$NP passed (baseline ${BASE_P[$fam]}), $NF failed (baseline \
${BASE_F[$fam]})${new:+; newly failing: $(echo $new)}; failing: $(cut -c1-160 "$log.failed" |
				head -n 5 | tr '\n' ';') skipped: $(head -n 5 "$log.skipped" | tr '\n' ';')"
		else
			flaky=${BASE_FLAKY[$fam]:+, flaky in the baseline}
			if [ "$NP" -gt "${BASE_P[$fam]}" ]; then
				echo "$fam: $NP passed, the baseline says ${BASE_P[$fam]}$flaky" >>"$RISES"
			fi
			pass "$fam: $NP passed (baseline ${BASE_P[$fam]}), $NF failed, $NS skipped$flaky"
		fi
		[ "$CONF_RESTART" = 1 ] && target_stop
	done
done
total_secs=$((SECONDS - start_all))
echo "| total | $tot_p | $tot_f | $tot_s | $total_secs | | |" >>"$REPORT"

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
if [ -s "$RISES" ]; then
	t_log ""
	how=--update-baseline
	[ "$TARGET" = tgtd ] && how=--baseline
	t_log "conformance: more passes than $BASELINE_FILE records (review, then rewrite it with" \
		"$how):"
	sed 's/^/  /' "$RISES"
fi
t_log "conformance: table in $T_BUILD/conformance-$TARGET.md, ${total_secs}s in all"

if [ "$MODE" = baseline ] && [ "$T_FAIL" -eq 0 ]; then
	how=--update-baseline
	[ "$TARGET" = tgtd ] && how=--baseline
	{
		if [ "$TARGET" = tgtd ]; then
			echo "# iscsi-test-cu against tgt $(dpkg-query -W -f='${Version}' tgt 2>/dev/null)," \
				"thin 1 GiB LUN in /dev/shm,"
		else
			echo "# iscsi-test-cu against isergwd, thin 1 GiB file LUN in /dev/shm,"
		fi
		echo "# one fresh target per family, -d, no -S; the worst of $RUNS runs. Produced by:"
		echo "#   tests/integration/test_conformance.sh $how"
		echo "libiscsi $LIBISCSI_VERSION"
		echo "# family passed failed skipped [flaky: its figures differed between the runs]"
		for fam in "${FAMILIES[@]}"; do
			[ -n "${W_FIRST[$fam]:-}" ] || continue
			echo "$fam ${W_P[$fam]} ${W_F[$fam]} ${W_S[$fam]}${W_FLAKY[$fam]:+ flaky}"
		done
		echo "# tests that failed in a run (any other failing test fails the suite)"
		for t in "${!W_FAILS[@]}"; do echo "fail $t"; done | sort
	} >"$BASELINE_FILE"
	t_log "conformance: baseline written to $BASELINE_FILE"
elif [ "$MODE" = baseline ]; then
	t_log "conformance: $BASELINE_FILE not rewritten: something failed"
fi
t_end

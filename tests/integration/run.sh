#!/bin/bash
# `make test-integration`: runs every tests/integration/test_*.sh (each a suite that starts its
# own target on loopback and prints "SUITE: N passed, N failed, N skipped"), sums their counts
# and ends with "integration: N passed, N failed, N skipped"; exit status 1 on any failure.
#
#   tests/integration/run.sh [SUITE...]     e.g. tests/integration/run.sh tools integrity
# Environment: BUILD (build or build/san), TARGET (isergwd, the default, or tgtd), and
# RUN_TIMEOUT seconds per suite (default 900): a suite that overruns it counts as failed.
set -u
cd "$(dirname "$0")/../.." || exit 1
export BUILD=${BUILD:-build}
export TARGET=${TARGET:-isergwd}
RUN_TIMEOUT=${RUN_TIMEOUT:-900}

suites=()
if [ $# -gt 0 ]; then
	for s in "$@"; do
		suites+=("tests/integration/test_${s#test_}")
		case "${suites[-1]}" in *.sh) ;; *) suites[-1]="${suites[-1]}.sh" ;; esac
	done
else
	for s in tests/integration/test_*.sh; do
		[ -e "$s" ] && suites+=("$s")
	done
fi

echo "integration: target $TARGET, build $BUILD, ${#suites[@]} suites"
p=0 f=0 k=0
summary=()
for s in "${suites[@]}"; do
	name=$(basename "$s" .sh)
	name=${name#test_}
	t0=$SECONDS
	if [ ! -x "$s" ] && [ ! -r "$s" ]; then
		echo "integration: $s not found"
		f=$((f + 1))
		continue
	fi
	out=$(mktemp)
	# The suite's own output streams through; its last count line is kept for the sum.
	timeout -k 10 "$RUN_TIMEOUT" bash "$s" 2>&1 | tee "$out"
	rc=${PIPESTATUS[0]}
	line=$(grep -E '^[A-Za-z0-9_-]+: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$out" |
		tail -n 1)
	rm -f "$out"
	sp=$(printf '%s' "$line" | sed -n 's/.*: \([0-9]*\) passed.*/\1/p')
	sf=$(printf '%s' "$line" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
	sk=$(printf '%s' "$line" | sed -n 's/.* \([0-9]*\) skipped$/\1/p')
	sp=${sp:-0} sf=${sf:-0} sk=${sk:-0}
	if [ -z "$line" ]; then
		echo "integration: $name printed no count line (exit $rc)"
		sf=$((sf + 1))
	elif [ "$rc" -ne 0 ] && [ "$sf" -eq 0 ]; then
		echo "integration: $name exited with status $rc"
		sf=$((sf + 1))
	fi
	[ "$rc" -eq 124 ] && echo "integration: $name overran ${RUN_TIMEOUT}s"
	p=$((p + sp)) f=$((f + sf)) k=$((k + sk))
	summary+=("$(printf '  %-14s %4d passed %4d failed %4d skipped %5ds' "$name" "$sp" "$sf" "$sk" \
		$((SECONDS - t0)))")
done
echo
printf '%s\n' "${summary[@]}"
echo "integration: $p passed, $f failed, $k skipped"
[ "$f" -eq 0 ]

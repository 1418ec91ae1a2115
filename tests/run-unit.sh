#!/bin/sh
# Runs each Criterion unit test binary given, then prints one total line over all of them.
# Criterion prints its own synthesis per binary; a binary that crashes or fails counts as failed.
set -u
pass=0
fail=0
bins=0
for t in "$@"; do
	bins=$((bins + 1))
	out=$("$t" --jobs 2 2>&1)
	rc=$?
	printf '%s\n' "$out"
	line=$(printf '%s\n' "$out" | grep 'Synthesis:' | tail -n 1)
	p=$(printf '%s' "$line" | sed -n 's/.*Passing: \([0-9]*\).*/\1/p')
	f=$(printf '%s' "$line" | sed -n 's/.*Failing: \([0-9]*\).*/\1/p')
	c=$(printf '%s' "$line" | sed -n 's/.*Crashing: \([0-9]*\).*/\1/p')
	pass=$((pass + ${p:-0}))
	fail=$((fail + ${f:-0} + ${c:-0}))
	if [ "$rc" -ne 0 ] && [ "${f:-0}" -eq 0 ] && [ "${c:-0}" -eq 0 ]; then
		echo "unit: $t exited with status $rc"
		fail=$((fail + 1))
	fi
done
echo "unit: $bins binaries"
echo "unit: $pass passed, $fail failed"
[ "$fail" -eq 0 ]

#!/bin/bash
# `make test-tsan`: the threaded parts under ThreadSanitizer, from a SANITIZE=thread build.
#   1. every tests/tsan/* program (the file backstore's workers under load, buffered and
#      O_DIRECT), each with TSAN_OPTIONS log_path in its own folder: exit 0 and no report;
#   2. the integration suites $TSAN_SUITES (default: tools durability loops resolve: the gateway with file,
#      block and remote backstores under I/O, FUA, flushes, kill -9 and restarts) with
#      BUILD=build/tsan: common.sh points TSAN_OPTIONS log_path at each run's san/ folder and
#      fails a suite on any report file.
# Ends with "tsan: N passed, N failed"; exit 1 on any failure.
#
#   BUILD=build/tsan tests/tsan/run.sh
set -u
cd "$(dirname "$0")/../.." || exit 1
export BUILD=${BUILD:-build/tsan}
SUITES=${TSAN_SUITES:-tools durability loops resolve}
p=0 f=0
t0=$SECONDS

# The images go on the build tree's file system: tmpfs would run the I/O on the loop thread.
work=$(mktemp -d "$BUILD/tsan-run.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
# Each program of tests/tsan/*.c must have been built and run: one missing is a failure, not a
# glob that matched nothing.
for src in tests/tsan/*.c; do
	name=$(basename "$src" .c)
	t=$BUILD/tests/tsan/$name
	if [ ! -x "$t" ]; then
		f=$((f + 1))
		printf '  FAIL  %s: not built (%s; make test-tsan builds it)\n' "$name" "$t"
		continue
	fi
	mkdir -p "$work/$name"
	out=$work/$name/out
	TSAN_OPTIONS="log_path=$work/$name/tsan:halt_on_error=0${TSAN_OPTIONS:+:$TSAN_OPTIONS}" \
		timeout -k 5 300 "$t" "$work/$name" >"$out" 2>&1
	rc=$?
	reports=$(ls "$work/$name"/tsan.* 2>/dev/null)
	if [ "$rc" -eq 0 ] && [ -z "$reports" ]; then
		p=$((p + 1))
		printf '  ok    %s: %s\n' "$name" "$(grep "^$name:" "$out" | tr '\n' ' ')"
	else
		f=$((f + 1))
		printf '  FAIL  %s: exit %d: %s\n' "$name" "$rc" "$(tail -n 3 "$out" | tr '\n' ' ')"
		for r in $reports; do
			head -n 60 "$r" | sed 's/^/    /'
		done
	fi
done

if BUILD=$BUILD tests/integration/run.sh $SUITES; then
	p=$((p + 1))
	echo "  ok    integration ($SUITES) under ThreadSanitizer"
else
	f=$((f + 1))
	echo "  FAIL  integration ($SUITES) under ThreadSanitizer"
fi
echo "tsan: took $((SECONDS - t0)) s"
echo "tsan: $p passed, $f failed"
[ "$f" -eq 0 ]

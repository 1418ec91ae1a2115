#!/bin/bash
# A newcomer's first minute: `make run` starts the demo (deploy/run-demo.sh) and prints "Try it"
# lines; each must work as printed, with only what `make run` installs. This suite starts the
# demo as `make run` does, inside a network namespace of its own (the demo's fixed ports,
# 127.0.0.1:3260 and :8080, then collide with no other run), takes the "Try it" lines from its
# output, runs each one there from the checkout's top folder and checks what a user would see;
# then stops the demo by PID. Before that, deploy/install-deps.sh: the
# packages of every "Try it" program are in what `make run` installs, and apt-get's output stays
# in a log unless it fails.
#
#   tests/integration/test_run.sh        (BUILD=build|build/san)
set -u
. "$(dirname "$0")/../lib/common.sh"

t_begin run
if ! t_need iscsi-ls iscsi-inq curl ip dpkg-query; then
	skip run "needs iscsi-ls, iscsi-inq (libiscsi-bin), curl, ip and dpkg-query"
	t_end
fi
if [ ! -x "$T_BUILD/isergwd" ] || [ ! -x "$T_BUILD/isergw-agent" ] || [ ! -x "$T_BUILD/isergwctl" ]; then
	fail build "isergwd, isergw-agent and isergwctl are not all built in $T_BUILD"
	t_end
fi

# ---- deploy/install-deps.sh --------------------------------------------------------------

# A fake apt-get and dpkg-query (first on PATH): one package is missing, apt-get prints a
# screenful of progress and exits with $FAKE_APT_RC.
FAKE=$T_DIR/fakebin
mkdir -p "$FAKE"
cat >"$FAKE/dpkg-query" <<'EOF'
#!/bin/sh
# Everything is installed but curl.
for a; do p=$a; done
[ "$p" = curl ] && { echo "unknown ok not-installed"; exit 0; }
echo "install ok installed"
EOF
cat >"$FAKE/apt-get" <<'EOF'
#!/bin/sh
echo "apt-get $* DEBIAN_FRONTEND=${DEBIAN_FRONTEND:-}" >>"$FAKE_APT_LOG"
i=0
while [ $i -lt 200 ]; do echo "Get:$i http://deb.debian.org/debian bookworm/main fake 1.0 [1 kB]"; i=$((i + 1)); done
exit "${FAKE_APT_RC:-0}"
EOF
chmod +x "$FAKE/dpkg-query" "$FAKE/apt-get"

if [ "$(id -u)" -ne 0 ]; then
	skip install-deps "not root: install-deps.sh installs nothing, it names what is missing"
else
out=$(PATH=$FAKE:$PATH FAKE_APT_LOG=$T_DIR/apt.calls FAKE_APT_RC=0 \
	"$T_ROOT/deploy/install-deps.sh" build run 2>&1)
rc=$?
lines=$(printf '%s\n' "$out" | wc -l)
if [ "$rc" -eq 0 ] && [ "$lines" -le 2 ] && ! printf '%s' "$out" | grep -q 'Get:' &&
	grep -q -- '-qq .*install .*curl.* DEBIAN_FRONTEND=noninteractive' "$T_DIR/apt.calls"; then
	pass "install-deps: apt-get runs quietly (-qq, noninteractive), its progress kept out of the output"
else
	fail "install-deps: apt-get runs quietly" \
		"exit $rc, $lines lines: $(printf '%s' "$out" | head -n 3 | tr '\n' '|') calls: $(tr '\n' '|' <"$T_DIR/apt.calls" 2>/dev/null)"
fi
out=$(PATH=$FAKE:$PATH FAKE_APT_LOG=$T_DIR/apt.calls FAKE_APT_RC=100 \
	"$T_ROOT/deploy/install-deps.sh" build run 2>&1)
rc=$?
if [ "$rc" -ne 0 ] && printf '%s' "$out" | grep -q 'Get:199' &&
	printf '%s' "$out" | grep -q 'apt-get failed'; then
	pass "install-deps: a failing apt-get's output is shown, and the script fails"
else
	fail "install-deps: a failing apt-get's output is shown" \
		"exit $rc: $(printf '%s' "$out" | tail -n 3 | tr '\n' '|')"
fi
# The failed run keeps its log for the user: this one was the fake's.
kept=$(printf '%s' "$out" | sed -n 's/.*kept in \(.*\))$/\1/p')
[ -n "$kept" ] && rm -f "$kept"
fi

# ---- the demo ----------------------------------------------------------------------------

# In a namespace of its own (t_ns_own), removed by t_stop_all.
if ! t_ns_own isergw-run; then
	skip run "cannot create network namespaces here"
	t_end
fi
NS=$T_NS

STATE=$T_DIR/state
OUT=$T_DIR/demo.out
# As `make run` does (mk/test.mk: BUILD=$(BUILD) deploy/run-demo.sh), from the top folder.
cd "$T_ROOT" || exit 1
# Sanitizer reports (a BUILD=build/san run) go to the run folder, where t_san_check finds them.
t_daemon_start demo demo "$OUT" ip netns exec "$NS" env ISERGW_STATE="$STATE" \
	BUILD="$BUILD" \
	ASAN_OPTIONS="log_path=$T_DIR/san/asan:detect_leaks=1:abort_on_error=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
	UBSAN_OPTIONS="log_path=$T_DIR/san/ubsan:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
	deploy/run-demo.sh
DEMO=$T_LAST_PID

# The banner is printed once the portal accepts; its last part names open-iscsi.
i=0
while ! grep -q "^Linux's own initiator" "$OUT" 2>/dev/null; do
	if ! t_alive "$DEMO" || [ "$i" -gt 300 ]; then
		fail start "the demo printed no banner within 30 s: $(tail -n 5 "$OUT" | tr '\n' '|')"
		t_end
	fi
	i=$((i + 1))
	sleep 0.1
done
pass "make run's demo starts and prints its banner"

# The "Try it" block: the lines after "Try it:" up to the first blank one.
mapfile -t TRY < <(sed -n '/^Try it:$/,/^$/{/^  /s/^  //p}' "$OUT")
if [ "${#TRY[@]}" -ge 4 ]; then
	pass "the banner has ${#TRY[@]} Try it lines (the agent's among them)"
else
	fail "Try it lines" "${#TRY[@]} found in: $(sed -n '/^Try it:/,$p' "$OUT" | tr '\n' '|')"
fi

# The packages that give each line's program are in what `make run` installs.
RUN_PKGS=" $("$T_ROOT/deploy/install-deps.sh" --list build run | tr '\n' ' ') "
for line in "${TRY[@]}"; do
	prog=${line%% *}
	case "$prog" in
	*/*) continue ;;	# built here
	esac
	path=$(command -v "$prog") || { fail "package of $prog" "$prog is not installed"; continue; }
	pkg=$(dpkg-query -S "$(readlink -f "$path")" 2>/dev/null | head -n 1 | cut -d: -f1)
	[ -z "$pkg" ] && pkg=$(dpkg-query -S "$path" 2>/dev/null | head -n 1 | cut -d: -f1)
	if [ -n "$pkg" ] && [[ "$RUN_PKGS" == *" $pkg "* ]]; then
		pass "make run installs $pkg, which gives $prog"
	else
		fail "package of $prog" "${pkg:-no package} is not in deploy/install-deps.sh build run"
	fi
done

# expect_out LINE PATTERN: what a user expects from each program.
n=0
for line in "${TRY[@]}"; do
	n=$((n + 1))
	out=$T_DIR/try$n.out
	timeout -k 5 30 ip netns exec "$NS" bash -c "$line" >"$out" 2>&1
	rc=$?
	case "$line" in
	iscsi-ls*) want='^Target:iqn\.2026-11\.org\.isergw:demo Portal:127\.0\.0\.1:3260,1$' ;;
	iscsi-inq*) want='^Vendor:ISERGW' ;;
	curl*/api/v1/health*) want='"status": *"ok"' ;;
	*isergwctl*target\ list*) want='iqn\.2026-11\.org\.isergw:demo' ;;
	*) want='.' ;;
	esac
	if [ "$rc" -ne 0 ]; then
		fail "Try it: $line" "exit $rc: $(head -n 3 "$out" | tr '\n' '|')"
	elif ! grep -Eq -- "$want" "$out"; then
		fail "Try it: $line" "no line matches /$want/ in: $(head -n 5 "$out" | tr '\n' '|')"
	else
		pass "Try it: $line"
	fi
done

# Stopping: the demo stops what it started and says so. Ctrl-C sends SIGINT to the terminal's
# foreground job; a background job of a script has SIGINT ignored (bash), so SIGTERM, which
# run-demo.sh handles the same way, stands in for it.
t_fault "SIGTERM to the demo" kill -TERM "$DEMO"
i=0
while t_alive "$DEMO" && [ "$i" -lt 200 ]; do
	sleep 0.1
	i=$((i + 1))
done
if t_alive "$DEMO"; then
	fail stop "the demo did not stop within 20 s of SIGTERM"
	t_stop_pid "$DEMO" 5
else
	wait "$DEMO"
	rc=$?
	t_forget "$DEMO"
	left=$(ip netns pids "$NS" 2>/dev/null | tr '\n' ' ')
	# run-demo.sh exits 0 whatever its daemons did: each must have said it stopped.
	if [ "$rc" -eq 0 ] && grep -q '^isergw: stopped$' "$OUT" && [ -z "$left" ] &&
		grep -q '^isergwd: main: stopped$' "$OUT" &&
		grep -q '^isergw-agent: agent: stopped$' "$OUT"; then
		pass "stopping the demo stops the gateway and the agent, exit 0"
	else
		fail stop "exit $rc, processes left: ${left:-none}: $(tail -n 3 "$OUT" | tr '\n' '|')"
		for p in $left; do kill -KILL "$p" 2>/dev/null; done
	fi
fi
t_san_check
t_end

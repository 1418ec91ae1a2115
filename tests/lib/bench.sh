# tests/lib/bench.sh: the arithmetic the benchmarks share (tests/bench/*.sh), sourced after
# tests/lib/common.sh. Every function prints "-" where a figure is missing, so a failed run
# shows as a dash in the table instead of a wrong number.

# bench_median FMT VALUE...: the median (mean of the middle two for an even count), printed
# with the printf format FMT; "-" when there is no value or any run failed ("-").
bench_median() {
	local fmt=$1 v
	shift
	[ $# -eq 0 ] && echo - && return
	for v in "$@"; do
		[ "$v" = - ] && echo - && return
	done
	printf '%s\n' "$@" | sort -g | awk -v fmt="$fmt\n" '{ v[NR] = $1 }
	END { printf fmt, NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# bench_ratio A B: A / B to two places; "-" when either is missing or B is not above 0.
bench_ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN {
		if (a == "-" || a == "" || b == "-" || b == "" || b + 0 <= 0) print "-"
		else printf "%.2f\n", a / b }'
}

# bench_field KEY LINE: the number after " KEY=" in LINE (isergw-bench's summary line).
bench_field() {
	sed -n "s/.* $1=\([0-9.]*\).*/\1/p" <<<"$2"
}

# bench_machine_ticks: "busy total" clock ticks of the whole machine since boot (/proc/stat:
# busy = user, nice, system, irq, softirq, steal; total adds idle and iowait).
bench_machine_ticks() {
	awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9; exit }' /proc/stat
}

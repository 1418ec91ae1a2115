# shellcheck shell=bash
# Sourced by the VM bench scripts (vm-iser.sh, guard.sh): one ratio between two targets from the
# guest bench's raw lines (tests/vm/guest/suite-bench-iser.sh: TARGET TRANSPORT ROW IOPS MIBS
# ROUND), taken within each round, where both ran side by side.
#
# bench_round_ratio DATA A B ROW FIELD [range]: A/B (each TARGET:TRANSPORT) in every round that
# has both, FIELD 4 (IOPS) or 5 (MiB/s); prints the median over the rounds, with "range" also
# the lowest and highest as "M (LO-HI)", and "-" when no round has both.
bench_round_ratio() {
	awk -v a="$2" -v b="$3" -v r="$4" -v f="$5" '
		$3 == r && $f != "-" { x[$1 ":" $2, $6] = $f; rounds[$6] = 1 }
		END { for (k in rounds) if ((a, k) in x && (b, k) in x && x[b, k] > 0)
			print x[a, k] / x[b, k] }' "$1" | sort -g |
		awk -v range="${6:-}" '{ v[NR] = $1 } END { if (!NR) { print "-"; exit }
			m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			if (range == "" || NR == 1) printf "%.2f", m
			else printf "%.2f (%.2f-%.2f)", m, v[1], v[NR] }'
}

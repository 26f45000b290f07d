#!/usr/bin/env bash
# stress.sh [RUNS] [COMMIT]: runs the whole suite (.ci/run, as CI does) RUNS times (default 5) in
# a row, each on a fresh clone of COMMIT (default HEAD), while two busy loops take the CPU
# beside it, the way a shared machine is busy. Prints one line per run and exits non-zero if any
# run failed; each run's output is kept in the directory it names.
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
commit=$(git rev-parse --short "${2:-HEAD}")
out=$(mktemp -d "${TMPDIR:-/tmp}/herald-stress-$commit.XXXX")
clone="$out/clone"
busy=()
for _ in 1 2; do
	sh -c 'while :; do :; done' &
	busy+=($!)
done
trap 'kill "${busy[@]}" 2>/dev/null; rm -rf "$clone"' EXIT
failed=0
for r in $(seq "$runs"); do
	rm -rf "$clone"
	git clone -q . "$clone" && git -C "$clone" checkout -q "$commit"
	s=$SECONDS
	(cd "$clone" && CI=true bash .ci/run) >"$out/run$r.log" 2>&1
	rc=$?
	[ "$rc" -eq 0 ] || failed=$((failed + 1))
	echo "run $r of $runs ($commit): exit $rc in $((SECONDS - s)) s, load $(cut -d' ' -f1-3 /proc/loadavg); log $out/run$r.log"
done
echo "$((runs - failed)) of $runs runs passed"
[ "$failed" -eq 0 ]

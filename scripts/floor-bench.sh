#!/usr/bin/env bash
# Fan-out to 10,000 against the floor (bench/floor): one herald node and floor, alternating,
# each fresh for its run and stopped by its pid, the same herald-bench client, RUNS (5) runs a
# side; then each side's P99 and server CPU per delivery per run, their medians, and herald's
# ratios to floor (docs/benchmarks.md, "Fan-out, one channel, one node").
#
#   scripts/floor-bench.sh                  this tree's herald against floor
#   HERALD_OLD=path scripts/floor-bench.sh  and that binary (e.g. the previous commit's) as a
#                                           third side, to compare a change in one run
#
# FANOUT_ARGS: more flags for herald-bench fanout (default: --subs 10000).
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

go build -o "$tmp/herald" ./cmd/herald
go build -o "$tmp/herald-bench" ./cmd/herald-bench
(cd bench/floor && go build -o "$tmp/floor" .)

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# start SIDE: starts a fresh server of SIDE (floor, herald, old); sets pid and port.
start() {
	port=$(freeport)
	case $1 in
	floor) "$tmp/floor" -addr "127.0.0.1:$port" >"$tmp/$1.log" 2>&1 & ;;
	herald) "$tmp/herald" serve --port "$port" --metrics-enabled=false --connection-rate-per-ip 0 >"$tmp/$1.log" 2>&1 & ;;
	old) "$HERALD_OLD" serve --port "$port" --metrics-enabled=false --connection-rate-per-ip 0 >"$tmp/$1.log" 2>&1 & ;;
	esac
	pid=$!
	pids+=("$pid")
	for _ in $(seq 300); do
		if curl -s -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null; then return; fi
		sleep 0.1
	done
	echo "$1 not ready: $(cat "$tmp/$1.log")" >&2
	exit 1
}

sides="floor herald"
if [ -n "${HERALD_OLD:-}" ]; then sides="floor old herald"; fi
: >"$tmp/rows"
for run in $(seq "${RUNS:-5}"); do
	for side in $sides; do
		start "$side"
		"$tmp/herald-bench" fanout ${FANOUT_ARGS:---subs 10000} --ws "ws://127.0.0.1:$port" \
			--rest "http://127.0.0.1:$port" --server-pid "$pid" --quiet --json >"$tmp/out" || true
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		python3 - "$tmp/out" "$side" "$run" >>"$tmp/rows" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
i = text.find("{")
try:
    rep = json.JSONDecoder().raw_decode(text, i)[0]
    d, u = rep["delivery"], rep.get("server_usage") or {}
    print(sys.argv[2], sys.argv[3], rep["latency"]["p99_ms"], u.get("cpu_per_delivery_us", 0), d["delivered"], d["expected"])
except Exception as e:
    print(sys.argv[2], sys.argv[3], "failed", 0, 0, 0)
PY
		tail -1 "$tmp/rows"
	done
done

python3 - "$tmp/rows" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
sides = []
for r in rows:
    if r[0] not in sides:
        sides.append(r[0])
print("== fan-out: P99 (ms) and server CPU per delivery (us) per run, and the medians")
print("%-8s %-40s %-40s %9s %9s %s" % ("side", "P99 per run", "CPU per run", "P99 med.", "CPU med.", "delivered"))
med = {}
for s in sides:
    rs = [r for r in rows if r[0] == s and r[2] != "failed"]
    p99 = [float(r[2]) for r in rs]
    cpu = [float(r[3]) for r in rs]
    got = "%d of %d" % (sum(int(r[4]) for r in rs), sum(int(r[5]) for r in rs))
    med[s] = (statistics.median(p99) if p99 else 0, statistics.median(cpu) if cpu else 0)
    print("%-8s %-40s %-40s %9.1f %9.2f %s" % (s, " ".join("%.1f" % x for x in p99), " ".join("%.2f" % x for x in cpu),
          med[s][0], med[s][1], got))
f = med.get("floor")
for s in sides:
    if s != "floor" and f and f[0] and f[1]:
        print("%s / floor: P99 %.3f, CPU per delivery %.3f" % (s, med[s][0] / f[0], med[s][1] / f[1]))
PY

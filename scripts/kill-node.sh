#!/usr/bin/env bash
# A node's death (docs/benchmarks.md, "Recovery and replay"): three herald nodes on one bus, a
# history rule on the bench's channels, CLIENTS (18,000) subscribers spread round robin over
# the nodes; once every client knows its position, node 2 gets SIGKILL (`herald-bench recover
# --kill-pid`), EVENTS (100) events are published to every channel through node 0 while its
# clients are away, then they reconnect at once, each to the next live node round robin (the
# balancer is modelled by the clients: a DNS round robin, or a balancer that took the dead
# backend out, costing no descriptors of its own), and resubscribe with recover from their
# position. It reports the time from the kill, and from the reconnect's start, until every
# one of them recovered every missed event, the per-client latency (P99) from its dial to its
# recovery frame, and the live nodes' HTTP port counters (herald_http_connections_evicted_total
# and the rest) after the storm. Every client connects from a loopback address of its own
# (--sources), as real users come from many addresses. Not part of the test suite: it runs on
# loopback, every process on a free port and stopped by its pid, under
# flock /tmp/herald-bench.lock, which it takes once herald is built.
#
#   scripts/kill-node.sh [redis|nats]          default: redis (nats: with JetStream, -js)
#
# Environment: CLIENTS (18000), CHANNELS (100), EVENTS (100), OUTAGE (5s, over which the
# events are spread), SOURCES (CLIENTS: one address per client), NODE_WORKERS (1: three nodes,
# the bus and the generator share the machine), BENCH_ARGS (more flags for herald-bench recover),
# NODE_BIN (the herald binary the nodes run, e.g. an older build to compare; default: this tree's).
set -euo pipefail
cd "$(dirname "$0")/.."

engine=${1:-redis}
clients=${CLIENTS:-18000}
channels=${CHANNELS:-100}
events=${EVENTS:-100}
outage=${OUTAGE:-5s}
sources=${SOURCES:-$clients}
workers=${NODE_WORKERS:-1}
case $engine in nats | redis) ;; *) echo "engine: nats or redis" >&2; exit 2 ;; esac

tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT

go build -o "$tmp/herald" ./cmd/herald && go build -o "$tmp/herald-bench" ./cmd/herald-bench
H=$tmp/herald
node_bin=${NODE_BIN:-$H}
exec 9>/tmp/herald-bench.lock
flock 9

cat >"$tmp/apps.yml" <<'YAML'
apps:
  - id: app-id
    key: app-key
    secret: app-secret
    history:
      - {channels: "kill*", size: 1000, ttl: 1h}
YAML

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
waitport() {
	for _ in $(seq 200); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return; fi
		sleep 0.1
	done
	echo "$2 did not start: $(cat "$3")" >&2
	exit 1
}

port=$(freeport)
case $engine in
nats)
	nats-server -a 127.0.0.1 -p "$port" -js -sd "$tmp/jetstream" >"$tmp/bus.log" 2>&1 &
	bus_url=nats://127.0.0.1:$port
	;;
redis)
	redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no >"$tmp/bus.log" 2>&1 &
	bus_url=redis://127.0.0.1:$port/0
	;;
esac
bus_pid=$!
pids+=("$bus_pid")
waitport "$port" "the bus server" "$tmp/bus.log"

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/cluster-secret" # 64 hex digits, every node's
ws=() np=() mp=()
for i in 0 1 2; do
	p=$(freeport)
	m=$(freeport)
	"$node_bin" serve --port "$p" --metrics-port "$m" --config "$tmp/apps.yml" --cluster-url "$bus_url" \
		--cluster-secret-file "$tmp/cluster-secret" --connection-rate-per-ip 0 --cluster-node-id "node-$i" --workers "$workers" --log-level warn >"$tmp/node-$i.log" 2>&1 &
	pids+=($!)
	np+=($!)
	mp+=("$m")
	ws+=("ws://127.0.0.1:$p")
	waitport "$p" "node $i" "$tmp/node-$i.log"
done

echo "== $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD)$(git diff --quiet || echo +changes); machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== 3 nodes on $engine$([ "$engine" = nats ] && echo ' (JetStream)') (--workers $workers each), history on kill* (1000 events, 1h);" \
	"$clients clients round robin over $channels channels and the 3 nodes, from $sources source addresses; node 2 killed with SIGKILL;" \
	"$events events per channel over $outage while its clients are away"
status=0
"$H-bench" recover --ws "$(IFS=,; echo "${ws[*]}")" --rest "http://127.0.0.1:${ws[0]##*:}" \
	--server-pid "$(IFS=,; echo "${np[*]}")" --bus-pid "$bus_pid" \
	--clients "$clients" --channels "$channels" --channel kill --events "$events" --outage "$outage" \
	--before 2 --after 2 --sources "$sources" --kill-pid "${np[2]}" --kill-node 2 \
	--timeout 3m --wait 2m --quiet ${BENCH_ARGS:-} || status=$?

echo "== the live nodes' HTTP port after the storm"
for i in 0 1; do
	echo "node $i: $(curl -s "http://127.0.0.1:${mp[$i]}/metrics" | grep -E '^herald_(http_connections_(evicted|refused|borrowed|spared)|http_request_timeouts|http_accept_fd_shortages)' | tr '\n' ' ')"
done
if grep -iE 'panic|fatal' "$tmp"/node-*.log >/dev/null; then
	echo "== node logs with errors:"
	grep -iE 'panic|fatal' "$tmp"/node-*.log | head -20
fi
exit "$status"

#!/usr/bin/env bash
# Cluster benchmarks (docs/benchmarks.md, "Fan-out over a cluster"): herald nodes on a real nats-server or
# redis-server, all on loopback, each server and node fresh for its run and stopped by its pid.
#
#   scripts/cluster-bench.sh fanout [nats|redis]        10,000 subscribers: 1 node, then 2 nodes
#   scripts/cluster-bench.sh big [nats|redis]           3 nodes x 18,000 connections, --procs 3:
#                                                       fanout, then idle (RSS per connection)
#   scripts/cluster-bench.sh multichannel [nats|redis]  40 channels x 475, every publish pattern
#                                                       (below), each on 1 node then on 2 nodes;
#                                                       one table at the end
#   scripts/cluster-bench.sh routing [nats|redis]       bus messages per publish, 3 nodes
#   scripts/cluster-bench.sh publish [nats|redis] [history]
#                                                       REST publish throughput: 1 node, then 2;
#                                                       with history, every channel keeps history
#                                                       in one run of each pair and none in the
#                                                       other (on, off, off, on), the same config
#                                                       file otherwise (NATS with JetStream in both)
#   scripts/cluster-bench.sh recover [nats|redis]       1,000 clients miss 100 events in a 10 s
#                                                       outage and recover: 1 node, then 2 nodes
#                                                       (back on their node, then on the other)
#   scripts/cluster-bench.sh presence [nats|redis]      3,000 members joining presence channels of
#                                                       100: 1 node, then 3 nodes, twice
#   scripts/cluster-bench.sh channels [nats|redis]      GET /channels listing 10,000 channels:
#                                                       1 node, then 3 nodes
#
# A third argument lists the bus's variants the cluster runs alternate between, comma-separated
# (default plain): plain (no cluster.secret: cluster.insecure), secret (cluster.secret: sealed messages), encrypt
# (cluster.secret and cluster.encrypt). fanout, multichannel and publish run one single node,
# then one cluster per variant, twice; publish takes history instead (see above):
#
#   scripts/cluster-bench.sh fanout nats plain,secret,encrypt
#
# multichannel runs herald-bench multichannel's publish patterns (PATTERNS, comma-separated; default
# all-channels,batch,batch-8,per-channel): all-channels, each event one request naming every
# channel (the default); batch, each channel's burst one batch_events request (--batch); batch-8,
# the same with 8 requests in flight, --interval 150ms (--batch --publishers 8); per-channel, one
# publisher per channel, all at once, each sending its channel's burst one event a request, each
# after the previous one's answer (--publish-per-channel); and, only when PATTERNS names it,
# per-channel-spread, the same with channel c's publisher posting to node c mod N
# (--spread-publishes; every other pattern publishes to the first node). Each runs on 1 node,
# then on 2 nodes (one cluster per variant), RUNS (1) times; the table at the end gives, per
# pattern and side, deliveries/s, CPU per delivery (every node's and, on a cluster, the bus
# server's, over the run's window), the publish requests' P50/P99, the deliveries missing,
# duplicated and out of order, and each cluster side's ratios to 1 node (deliveries/s, CPU per
# delivery, publish P50, P99). MC_ARGS go to every pattern after its own flags, e.g.
# MC_ARGS="--subs 4000 --rounds 2" for a short run.
#
# MC_PROCS (2): herald-bench's --procs for every multichannel run, batch and bundles too: the
# subscribers in that many child processes, the publishers alone in the parent, as an
# application's publishers run in processes of their own. Sharing a process with the 19,000
# subscribers, the publishers' goroutines wait behind their readers while deliveries pour in,
# and a request's time then includes that wait: up to 137 ms measured by the publisher for at
# most 19 ms in the node (docs/benchmarks-archive.md, "Every publish pattern over a cluster,
# the publishers in their own process"). MC_PROCS=1 keeps them in one process.
#
# HISTORY=1: every channel keeps history (the nodes read a config with a history rule for "*";
# NATS runs with JetStream), on both sides.
#
# multichannel batch: each channel's burst as one batch_events request (--batch), 1 node then 2,
# twice (BUNDLES=false: the nodes run with cluster.bundles off; HERALD_SERVER=path: the nodes
# run that binary, a previous release's, to compare in one run with this one's; MC_ARGS: more
# flags for herald-bench multichannel, e.g. "--interval 100ms --rounds 20" to saturate the server)
#
# FANOUT_ARGS: more flags for herald-bench fanout, e.g. "--events 20" (more events a run, so
# that one slow event does not decide its P99). RUNS (2): how many times fanout runs one
# node, then the cluster(s); it ends with each side's P99 per run, their medians, and the
# ratio of the medians.
#
# NODE_PROCS=n: the cluster's nodes run with GOMAXPROCS=n (the single node keeps the machine's),
# e.g. NODE_PROCS=1 for two nodes sharing this machine's two cores, a core each.
#
# NODE_WORKERS=n: the cluster's nodes run with --workers n; by default each takes its share of
# the machine's cores (cores / nodes, at least 1), as docs/scaling.md advises for nodes that
# share a machine (two nodes of two workers each on two cores spent a quarter more CPU per
# delivery); NODE_WORKERS=0 gives them herald's default, one per core. The single node keeps
# one per core.
#
# multichannel with bundles instead: each channel's burst as one batch_events request
# (--batch), 2 nodes, cluster.bundles on, off, off, on; the bus messages the nodes sent and
# received over the run are printed after each:
#
#   scripts/cluster-bench.sh multichannel nats bundles
#
# The bus server's CPU time over each scenario's window is in the server's (--bus-pid), and over
# the whole run printed beside herald's report.
set -euo pipefail
cd "$(dirname "$0")/.."

scenario=${1:?usage: cluster-bench.sh fanout|big|multichannel|routing|publish|presence|channels|recover [nats|redis] [history | plain,secret,encrypt]}
engine=${2:-nats}
variants=${3:-plain}
variant=plain # of the cluster started next
case $variants in
history | bundles | batch) mode=$variants variants=plain ;;
*) mode= ;;
esac
bundles=${BUNDLES:-} # set (true or false): the nodes run with --cluster-bundles=$bundles
js=         # set: nats-server runs with JetStream (history needs it)
node_config= # set: the nodes read this config file
node_workers=${NODE_WORKERS:-0} # the cluster nodes' --workers (cluster sets each run's share)
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/secret" # 64 hex digits

go build -o "$tmp/herald" ./cmd/herald && go build -o "$tmp/herald-bench" ./cmd/herald-bench
H=$tmp/herald
# HERALD_SERVER, when set, is the binary the nodes run (another release's, to compare with
# this one's in one run); herald-bench is always this tree's.
S=${HERALD_SERVER:-$H}

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
cputicks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# stop PID: stop one process this script started and wait for it.
stop() {
	kill "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

# start_bus: starts the bus server; sets bus_pid and bus_url.
start_bus() {
	local port
	port=$(freeport)
	case $engine in
	nats)
		local jsargs=()
		if [ -n "$js" ]; then jsargs=(-js -sd "$tmp/js-$port"); fi
		nats-server -a 127.0.0.1 -p "$port" "${jsargs[@]}" >"$tmp/bus.log" 2>&1 &
		bus_pid=$!
		bus_url=nats://127.0.0.1:$port
		;;
	redis)
		redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no >"$tmp/bus.log" 2>&1 &
		bus_pid=$!
		bus_url=redis://127.0.0.1:$port/0
		;;
	*) echo "engine: nats or redis" >&2; exit 2 ;;
	esac
	pids+=("$bus_pid")
	for _ in $(seq 100); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return; fi
		sleep 0.1
	done
	echo "bus server did not start: $(cat "$tmp/bus.log")" >&2
	exit 1
}

# start_node NAME [CLUSTER_URL]: starts a herald node; sets node_pid, node_port, node_metrics.
start_node() {
	node_port=$(freeport)
	node_metrics=$(freeport)
	# The generator's clients come from a few loopback addresses: no per-address connection limit.
	local args=(serve --port "$node_port" --metrics-port "$node_metrics" --connection-rate-per-ip 0)
	if [ -n "$node_config" ]; then args+=(--config "$node_config"); fi
	case $variant in
	plain) ;;
	secret) args+=(--cluster-secret-file "$tmp/secret") ;;
	encrypt) args+=(--cluster-secret-file "$tmp/secret" --cluster-encrypt) ;;
	*) echo "variant: plain, secret or encrypt" >&2; exit 2 ;;
	esac
	if [ -n "${2:-}" ]; then args+=(--cluster-url "$2" --cluster-node-id "$1" --workers "$node_workers"); fi
	# A cluster without a secret must say so (cluster.insecure); a single node has no bus to seal.
	if [ -n "${2:-}" ] && [ "$variant" = plain ]; then args+=(--cluster-insecure); fi
	if [ -n "$bundles" ]; then args+=("--cluster-bundles=$bundles"); fi
	if [ -n "${2:-}" ] && [ -n "${NODE_PROCS:-}" ]; then
		GOMAXPROCS=$NODE_PROCS "$S" "${args[@]}" >"$tmp/$1.log" 2>&1 &
	else
		"$S" "${args[@]}" >"$tmp/$1.log" 2>&1 &
	fi
	node_pid=$!
	pids+=("$node_pid")
	for _ in $(seq 300); do
		if curl -fs "http://127.0.0.1:$node_port/ready" >/dev/null 2>&1; then return; fi
		sleep 0.1
	done
	echo "node $1 not ready: $(cat "$tmp/$1.log")" >&2
	exit 1
}

# bench ARGS...: runs herald-bench with the bus server's CPU time measured around it.
bench() {
	local before=0
	[ -n "${bus_pid:-}" ] && before=$(cputicks "$bus_pid")
	"$H-bench" "$@" --quiet || true
	if [ -n "${bus_pid:-}" ]; then
		echo "bus server ($engine) CPU during the run: $(( ($(cputicks "$bus_pid") - before) * 10 )) ms"
	fi
}

metric() { # metric PORT NAME: the value of one unlabelled metric
	curl -fs "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 == n {print $2}'
}

single() { # single SCENARIO ARGS...: one fresh node, no bus
	bus_pid=
	start_node solo
	echo "== single node: $*"
	bench "$@" --ws "ws://127.0.0.1:$node_port" --rest "http://127.0.0.1:$node_port" --server-pid "$node_pid"
	stop "$node_pid"
}

cluster() { # cluster N SCENARIO ARGS...: N fresh nodes on a fresh bus
	local n=$1
	shift
	node_workers=${NODE_WORKERS:-$(($(nproc) / n > 0 ? $(nproc) / n : 1))}
	start_bus
	local ws=() np=() nm=() first= p
	for i in $(seq "$n"); do
		start_node "node-$i" "$bus_url"
		ws+=("ws://127.0.0.1:$node_port")
		np+=("$node_pid")
		nm+=("$node_metrics")
		[ -z "$first" ] && first=$node_port
	done
	if [ "$bundles" = true ]; then # bundles start two heartbeats after a node's start
		for _ in $(seq 300); do
			if curl -fs "http://127.0.0.1:$first/health" | grep -q '"features_in_use":\["bundles"'; then break; fi
			sleep 0.1
		done
	fi
	echo "== $n nodes on $engine ($variant${bundles:+, bundles $bundles}, workers $node_workers each): $*"
	bench "$@" --ws "$(IFS=,; echo "${ws[*]}")" --rest "http://127.0.0.1:$first" --server-pid "$(IFS=,; echo "${np[*]}")" --bus-pid "$bus_pid"
	if [ -n "$bundles" ]; then
		local sent=0 recv=0 b=0
		for m in "${nm[@]}"; do
			sent=$((sent + $(metric "$m" herald_bus_messages_sent_total)))
			recv=$((recv + $(metric "$m" herald_bus_messages_received_total)))
			b=$((b + $(metric "$m" herald_bus_bundles_sent_total)))
		done
		echo "bus messages over the run, all nodes: sent $sent (bundles $b), received $recv"
	fi
	for p in "${np[@]}"; do stop "$p"; done
	stop "$bus_pid"
}

# mc_flags PATTERN: the herald-bench multichannel flags of a publish pattern.
mc_flags() {
	case $1 in
	all-channels) echo "" ;;                                      # each event one request naming every channel
	batch) echo "--batch" ;;                                      # each channel's burst one batch_events request
	batch-8) echo "--batch --publishers 8 --interval 150ms" ;;    # the same, 8 requests in flight
	per-channel) echo "--publish-per-channel" ;;                  # one publisher per channel, one event a request
	per-channel-spread) echo "--publish-per-channel --spread-publishes" ;; # the same, channel c's to node c mod N
	*)
		echo "multichannel pattern $1: all-channels, batch, batch-8, per-channel or per-channel-spread" >&2
		exit 2
		;;
	esac
}

# mc_line FILE: the lines of a multichannel run's output (herald-bench --json between this
# script's own lines), its JSON report summed up in one line.
mc_line() {
	python3 - "$1" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
i = text.find("{")
rep, end = (json.JSONDecoder().raw_decode(text, i) if i >= 0 else (None, 0))
for line in (text[:max(i, 0)] + text[end:]).splitlines():
    if line.strip():
        print(line)
if rep is None:
    print("  no report: the run failed (see above)")
else:
    d, u, pl = rep["delivery"], rep.get("server_usage") or {}, rep["publish_latency"]
    print("  %s: %d of %d delivered, %.0f deliveries/s, %.2f us CPU per delivery (the generator's %.2f), %.2f deliveries per write, publish P50/P99 %.1f/%.1f ms"
          % (rep["publish"], d["delivered"], d["expected"], rep["deliveries_per_sec"],
             u.get("cpu_per_delivery_us", 0), rep["generator"].get("cpu_per_delivery_us", 0),
             u.get("deliveries_per_write", 0), pl["p50_ms"], pl["p99_ms"]))
PY
}

# mc_table LIST: the table of the multichannel runs LIST names (pattern, run, side, file;
# tab-separated): per pattern and run, each side, then each cluster side's ratios to 1 node.
mc_table() {
	python3 - "$1" <<'PY'
import json, sys
rows = []
for line in open(sys.argv[1]):
    pattern, run, side, path = line.rstrip("\n").split("\t")
    text = open(path).read()
    i = text.find("{")
    rep = json.JSONDecoder().raw_decode(text, i)[0] if i >= 0 else None
    rows.append((pattern, run, side, rep))
print("== multichannel, every publish pattern: CPU per delivery counts every node and, on a cluster, the bus server")
hdr = "%-19s %-3s %-16s %13s %12s %9s %10s %10s %10s %10s %16s %19s" % ("pattern", "run", "side", "deliveries/s", "us CPU/del.",
      "del/write", "pub P50 ms", "pub P99 ms", "lat P50 ms", "lat P99 ms", "lost/dup/reord.", "delivered")
print(hdr)
print("-" * len(hdr))
def figures(rep):
    d, u, pl = rep["delivery"], rep.get("server_usage") or {}, rep["publish_latency"]
    return rep["deliveries_per_sec"], u.get("cpu_per_delivery_us", 0), pl["p50_ms"], pl["p99_ms"], d
one = {}
for pattern, run, side, rep in rows:
    if rep is None:
        print("%-19s %-3s %-16s %s" % (pattern, run, side, "no report: the run failed"))
        continue
    rate, cpu, p50, p99, d = figures(rep)
    lat, perw = rep["latency"], (rep.get("server_usage") or {}).get("deliveries_per_write", 0)
    print("%-19s %-3s %-16s %13.0f %12.2f %9.2f %10.1f %10.1f %10.1f %10.1f %16s %19s" % (pattern, run, side, rate, cpu, perw, p50, p99,
          lat["p50_ms"], lat["p99_ms"], "%d/%d/%d" % (d["missing"], d["duplicated"], d["out_of_order"]), "%d of %d" % (d["delivered"], d["expected"])))
    if side == "1 node":
        one[(pattern, run)] = (rate, cpu, p50, p99)
        continue
    base = one.get((pattern, run))
    if base is None:
        continue
    ratio = lambda a, b: "%.2f" % (a / b) if b else "-"
    print("%-19s %-3s %-16s %13s %12s %9s %10s %10s" % ("", "", side.replace("2 nodes", "2 / 1", 1), ratio(rate, base[0]),
          ratio(cpu, base[1]), "", ratio(p50, base[2]), ratio(p99, base[3])))
PY
}

case $scenario in
fanout)
	: >"$tmp/p99"
	for run in $(seq "${RUNS:-2}"); do
		single fanout --subs 10000 ${FANOUT_ARGS:-} >"$tmp/out"
		cat "$tmp/out"
		echo "1-node $(awk '$1 == "all" {print $6}' "$tmp/out")" >>"$tmp/p99"
		for variant in ${variants//,/ }; do
			cluster 2 fanout --subs 10000 ${FANOUT_ARGS:-} >"$tmp/out"
			cat "$tmp/out"
			echo "2-nodes-$variant $(awk '$1 == "all" {print $6}' "$tmp/out")" >>"$tmp/p99"
		done
	done
	# Each side's P99 over the runs, and the ratio of the medians: one run's P99 moves by
	# itself by up to 13 % (docs/benchmarks.md), the median of several runs much less.
	echo "== P99 (ms) of each run, in the order run, and the median of each side"
	sort -s -k1,1 "$tmp/p99" | awk '
		function median(s, n,   v, i, j, t) {
			n = split(s, v, " ")
			for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j-1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j-1]; v[j-1] = t }
			return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
		}
		{ runs[$1] = runs[$1] " " $2 }
		END {
			one = median(runs["1-node"])
			for (k in runs) {
				m = median(runs[k])
				printf "  %-18s %s  median %.1f  ratio to 1 node %.3f\n", k, runs[k], m, m / one
			}
		}'
	;;
big)
	cluster 3 fanout --subs 54000 --procs 3 --timeout 3m
	cluster 3 idle --conns 54000 --channels 1 --procs 3 --timeout 3m
	;;
multichannel)
	procs=() # MC_PROCS: the publishers apart from the subscribers (above)
	if [ "${MC_PROCS:-2}" -gt 1 ]; then procs=(--procs "${MC_PROCS:-2}"); fi
	if [ "$mode" = bundles ]; then
		for bundles in true false false true; do cluster 2 multichannel --batch "${procs[@]}"; done
		exit 0
	fi
	if [ "$mode" = batch ]; then # each channel's burst as one batch_events request: 1 node, then 2
		for run in 1 2; do
			single multichannel --batch "${procs[@]}" ${MC_ARGS:-}
			cluster 2 multichannel --batch "${procs[@]}" ${MC_ARGS:-}
		done
		exit 0
	fi
	# Every publish pattern of herald-bench multichannel, each on 1 node, then on 2 nodes (one
	# cluster per variant), RUNS times; one table at the end.
	patterns=${PATTERNS:-all-channels,batch,batch-8,per-channel}
	for pattern in ${patterns//,/ }; do mc_flags "$pattern" >/dev/null; done # an unknown pattern fails before any run
	if [ -n "${HISTORY:-}" ]; then # every channel keeps history (NATS with JetStream)
		echo "apps: [{id: app-id, key: app-key, secret: app-secret, history: [{channels: \"*\", size: 1000, ttl: 10m}]}]" >"$tmp/history.yaml"
		js=1 node_config=$tmp/history.yaml
	fi
	: >"$tmp/mc-runs"
	for run in $(seq "${RUNS:-1}"); do
		for pattern in ${patterns//,/ }; do
			read -ra flags <<<"$(mc_flags "$pattern")"
			flags+=("${procs[@]}")
			out=$tmp/mc-$run-$pattern-1
			single multichannel "${flags[@]}" ${MC_ARGS:-} --json >"$out"
			mc_line "$out"
			printf '%s\t%s\t1 node\t%s\n' "$pattern" "$run" "$out" >>"$tmp/mc-runs"
			for variant in ${variants//,/ }; do
				out=$tmp/mc-$run-$pattern-2-$variant
				cluster 2 multichannel "${flags[@]}" ${MC_ARGS:-} --json >"$out"
				mc_line "$out"
				side="2 nodes"
				[ "$variant" = plain ] || side="2 nodes $variant"
				printf '%s\t%s\t%s\t%s\n' "$pattern" "$run" "$side" "$out" >>"$tmp/mc-runs"
			done
		done
	done
	mc_table "$tmp/mc-runs"
	;;
publish)
	if [ "$mode" = history ]; then
		# The same app in both files; only the history rule differs (every channel: pub-0 ...).
		app='apps: [{id: app-id, key: app-key, secret: app-secret'
		echo "$app}]" >"$tmp/off.yaml"
		echo "$app, history: [{channels: \"*\", size: 1000, ttl: 10m}]}]" >"$tmp/on.yaml"
		js=1
		for v in on off off on; do
			node_config=$tmp/$v.yaml
			echo "== history $v"
			single publish --publishers 32
			cluster 2 publish --publishers 32
		done
	else
		for run in 1 2; do
			single publish --publishers 32
			for variant in ${variants//,/ }; do cluster 2 publish --publishers 32; done
		done
	fi
	;;
recover)
	echo 'apps: [{id: app-id, key: app-key, secret: app-secret, history: [{channels: "*", size: 1000, ttl: 10m}]}]' >"$tmp/on.yaml"
	js=1 node_config=$tmp/on.yaml
	for run in 1 2; do
		single recover
		cluster 2 recover
		cluster 2 recover --switch-nodes
	done
	;;
presence)
	for run in 1 2; do
		single presence --clients 3000 --per-channel 100
		cluster 3 presence --clients 3000 --per-channel 100
	done
	;;
channels)
	single channels --channels 10000 --requests 100
	cluster 3 channels --channels 10000 --requests 100
	;;
routing)
	start_bus
	ports=() mports=() np=()
	for i in 1 2 3; do
		start_node "node-$i" "$bus_url"
		ports+=("$node_port") mports+=("$node_metrics") np+=("$node_pid")
	done
	report() {
		for i in 0 1 2; do
			echo "  node-$((i + 1)): bus messages sent $(metric "${mports[$i]}" herald_bus_messages_sent_total), received $(metric "${mports[$i]}" herald_bus_messages_received_total), interests $(metric "${mports[$i]}" herald_bus_interests)"
		done
	}
	echo "== 3 nodes on $engine; 1,000 subscribers on node-3 only, 5 events published to node-1"
	bench fanout --subs 1000 --interval 500ms --ws "ws://127.0.0.1:${ports[2]}" --rest "http://127.0.0.1:${ports[0]}" --server-pid "${np[2]}"
	report
	echo "== then 999 subscribers spread over all 3 nodes, 5 events published to node-1"
	bench fanout --subs 999 --interval 500ms --ws "ws://127.0.0.1:${ports[0]},ws://127.0.0.1:${ports[1]},ws://127.0.0.1:${ports[2]}" \
		--rest "http://127.0.0.1:${ports[0]}" --server-pid "${np[0]},${np[1]},${np[2]}"
	report
	;;
*)
	echo "unknown scenario $scenario" >&2
	exit 2
	;;
esac

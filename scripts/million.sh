#!/usr/bin/env bash
# A million connections on this one machine (docs/benchmarks.md, "A million connections"): one
# bus server, herald nodes of about 19,000 connections each (the per-process open-file limit is
# 20,000) and as many client processes, all on loopback, each on a free port, every process
# started here stopped by its pid. Not part of the test suite: it takes the whole machine for
# about half an hour at a million (18 minutes of set-up on two cores), under
# flock /tmp/herald-bench.lock, which it takes itself once herald is built.
#
#   scripts/million.sh [nats|redis] [conns]        default: nats 1000000
#
# One `herald-bench fanout` run: every connection subscribes to one channel; then a quiet
# window of IDLE (120s) with the clients pinging as pusher-js does (after activity_timeout,
# 120 s, of silence), then IDLE_FAST (60s) with the clients' own activity timeout at
# IDLE_FAST_ACTIVITY (30s; pusher-js's activityTimeout option, herald keeping its 120 s), then
# EVENTS (5) events INTERVAL (20s) apart to all of them. It reports the set-up rate, user-space
# RSS per connection per node, the kernel's memory per socket, idle CPU per connection, the
# fan-out's delivery and latency; this script adds the machine's peaks (CPU, memory, open
# files, sockets) sampled every 5 s.
#
# Environment: GOMAXPROCS (1) for every Go process here; PER_NODE (19000) connections per node and per client process; NODE_ACTIVITY
# (empty: herald's default, 120s) herald's activity_timeout; IDLE, IDLE_FAST,
# IDLE_FAST_ACTIVITY, EVENTS, INTERVAL as above; MIN_AVAILABLE_MIB (1024): the run is stopped
# when the machine's available memory falls below it; NATS_PING_INTERVAL (30s) and
# NATS_PINGS_OUTSTANDING (3): the nodes' NATS keepalive (cluster.nats_ping_interval,
# cluster.nats_pings_outstanding; herald's defaults are 3s and 3), loose because here a live
# nats-server's read loops waited up to 48 s for the CPU (every node's connection went stale at
# 5 s × 3); NODE_PONG (90s): herald's pong_timeout (its default is 30 s), loose because here
# a fan-out to a million takes 30 to 40 s to reach its last client, and a client whose server
# ping was queued behind an event answers it only once it has read the event: at 30 s, 143 of
# a million were closed with 4201 in one run;
# LOGS: a directory to keep the nodes' and the bus server's logs in (default: dropped);
# RECONNECT (1): the clients the server closes come back as pusher-js does, and resubscribe
# with recover from their position when the channel keeps history, and a failed first
# connection is tried again a second later (herald-bench fanout --reconnect; 0: they stay
# closed and failed, as in the runs before 2026-11-27); HISTORY (1): the
# channel keeps its last 100 events for an hour (a history rule in the app's configuration;
# on NATS the bus server then runs JetStream, -js), so that a client closed during the
# fan-out recovers the events it missed; 0: no history, and a client the server closes
# resubscribes plainly.
#
# Each 5 s sample and the end of the run also count the packets the kernel dropped because a
# CPU's input backlog was full (/proc/net/softnet_stat; on loopback every segment passes
# through it) and the TCP segments it retransmitted: at a million on two cores the kernel
# drops tens of millions, and a client whose pong is dropped again and again reaches herald
# only after TCP's retransmission backoff, past pong_timeout (docs/benchmarks-archive.md).
set -euo pipefail
cd "$(dirname "$0")/.."

engine=${1:-nats}
conns=${2:-1000000}
per=${PER_NODE:-19000}
nodes=$(((conns + per - 1) / per))
idle=${IDLE:-120s}
idle_fast=${IDLE_FAST:-60s}
idle_fast_activity=${IDLE_FAST_ACTIVITY:-30s}
events=${EVENTS:-5}
interval=${INTERVAL:-20s}
min_avail=${MIN_AVAILABLE_MIB:-1024}
case $engine in nats | redis) ;; *) echo "usage: million.sh [nats|redis] [conns]" >&2; exit 2 ;; esac
reconnect=${RECONNECT:-1}
history=${HISTORY:-1}
nats_ping=${NATS_PING_INTERVAL:-30s}
nats_pings=${NATS_PINGS_OUTSTANDING:-3}

# Every process here (nodes, bus clients, client processes) runs on one scheduler thread:
# 107 processes share two cores, and two threads each only multiply the runnable threads
# (the load average passed 300 with GOMAXPROCS=2, and the nodes' NATS keepalives went stale).
export GOMAXPROCS=${GOMAXPROCS:-1}

tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT

# What the kernel must hold: two sockets per connection (both ends on this machine).
limit=$(ulimit -n)
if [ "$limit" != unlimited ] && [ "$limit" -lt $((per + 500)) ]; then
	echo "open-file limit $limit is below PER_NODE + 500 = $((per + 500))" >&2
	exit 1
fi
read -r fopen _ fmax </proc/sys/fs/file-nr
need=$((2 * conns + 100 * nodes))
echo "== machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), MemAvailable $(awk '/MemAvailable/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
echo "== kernel tables: fs.file-max $fmax ($fopen open now; this run needs about $need more);" \
	"ephemeral ports $(tr '\t' - </proc/sys/net/ipv4/ip_local_port_range);" \
	"tcp_mem $(cat /proc/sys/net/ipv4/tcp_mem) pages;" \
	"netdev_max_backlog $(cat /proc/sys/net/core/netdev_max_backlog) packets per CPU;" \
	"conntrack $(cat /proc/sys/net/netfilter/nf_conntrack_max 2>/dev/null || echo 'not loaded')"
if [ $((fopen + need)) -gt "$fmax" ]; then
	echo "fs.file-max $fmax cannot hold $need more open files (sysctl -w fs.file-max=...)" >&2
	exit 1
fi

go build -o "$tmp/herald" ./cmd/herald && go build -o "$tmp/herald-bench" ./cmd/herald-bench
H=$tmp/herald
# The development app's credentials, with a history rule for the bench's channel.
if [ "$history" = 1 ]; then
	cat >"$tmp/apps.yml" <<'YAML'
apps:
  - id: app-id
    key: app-key
    secret: app-secret
    history:
      - {channels: fanout, size: 100, ttl: 1h}
YAML
fi
bench_args=()
if [ "$reconnect" = 1 ]; then bench_args+=(--reconnect); fi

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

start_bus() {
	local port
	port=$(freeport)
	case $engine in
	nats)
		local js=()
		if [ "$history" = 1 ]; then js=(-js -sd "$tmp/jetstream"); fi
		nats-server -a 127.0.0.1 -p "$port" "${js[@]}" >"$tmp/bus.log" 2>&1 &
		bus_url=nats://127.0.0.1:$port
		;;
	redis)
		redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no >"$tmp/bus.log" 2>&1 &
		bus_url=redis://127.0.0.1:$port/0
		;;
	esac
	bus_pid=$!
	pids+=("$bus_pid")
	for _ in $(seq 100); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return; fi
		sleep 0.1
	done
	echo "bus server did not start: $(cat "$tmp/bus.log")" >&2
	exit 1
}

# start_node I: starts herald node I on the bus; appends to ws, np, mp. Every node shares one
# cluster secret.
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/cluster-secret" # 64 hex digits
ws=() np=() mp=()
start_node() {
	local port metrics args
	port=$(freeport)
	metrics=$(freeport)
	# A million clients from a few thousand loopback addresses: no per-address connection limit.
	args=(serve --port "$port" --metrics-port "$metrics" --cluster-url "$bus_url" --cluster-secret-file "$tmp/cluster-secret" --cluster-node-id "node-$1" --connection-rate-per-ip 0)
	if [ "$history" = 1 ]; then args+=(--config "$tmp/apps.yml"); fi
	if [ -n "${NODE_ACTIVITY:-}" ]; then args+=(--activity-timeout "$NODE_ACTIVITY"); fi
	args+=(--pong-timeout "${NODE_PONG:-90s}")
	if [ "$engine" = nats ]; then
		args+=(--cluster-nats-ping-interval "$nats_ping" --cluster-nats-pings-outstanding "$nats_pings")
	fi
	"$H" "${args[@]}" >"$tmp/node-$1.log" 2>&1 &
	pids+=($!)
	np+=($!)
	mp+=("$metrics")
	ws+=("ws://127.0.0.1:$port")
	first_port=${first_port:-$port}
}

await_nodes() {
	local url
	for url in "${ws[@]}"; do
		url=${url/ws:/http:}
		for _ in $(seq 300); do
			if curl -fs "$url/ready" >/dev/null 2>&1; then continue 2; fi
			sleep 0.1
		done
		echo "node at $url not ready" >&2
		exit 1
	done
}

# backlog_drops: packets the kernel dropped, all CPUs, because its per-CPU input backlog
# (net.core.netdev_max_backlog) was full; on loopback every segment passes through it.
backlog_drops() { awk '{s += strtonum("0x" $2)} END {print s}' /proc/net/softnet_stat; }
# retransmits: TCP segments the kernel sent again (Tcp RetransSegs).
retransmits() { awk '/^Tcp:/ {if (!h) {for (i = 1; i <= NF; i++) if ($i == "RetransSegs") c = i; h = 1} else print $c}' /proc/net/snmp; }

# sample: every 5 s one line of the machine's state, until killed.
sample() {
	local prev cur d0 d1 r0 r1
	prev=$(awk '/^cpu / {print $2+$3+$4+$6+$7+$8, $5}' /proc/stat)
	d0=$(backlog_drops) r0=$(retransmits)
	while sleep 5; do
		cur=$(awk '/^cpu / {print $2+$3+$4+$6+$7+$8, $5}' /proc/stat)
		read -r b0 i0 <<<"$prev"
		read -r b1 i1 <<<"$cur"
		prev=$cur
		d1=$(backlog_drops) r1=$(retransmits)
		printf '%s busy=%d%% backlog_drops=%d retrans=%d avail_mib=%d slab_mib=%d files=%d tcp_inuse=%d tcp_mem_pages=%d tw=%d\n' \
			"$(date +%T)" $(((b1 - b0) * 100 / (b1 - b0 + i1 - i0 + 1))) $((d1 - d0)) $((r1 - r0)) \
			"$(awk '/MemAvailable/ {print int($2/1024)}' /proc/meminfo)" \
			"$(awk '/^Slab/ {print int($2/1024)}' /proc/meminfo)" \
			"$(awk '{print $1}' /proc/sys/fs/file-nr)" \
			"$(awk '/^TCP:/ {print $3}' /proc/net/sockstat)" \
			"$(awk '/^TCP:/ {for (i=2;i<NF;i++) if ($i=="mem") print $(i+1)}' /proc/net/sockstat)" \
			"$(awk '/^TCP:/ {for (i=2;i<NF;i++) if ($i=="tw") print $(i+1)}' /proc/net/sockstat)"
		d0=$d1 r0=$r1
	done
}

# guard PID: stops the bench (PID) when the machine's available memory falls below min_avail.
guard() {
	while sleep 2; do
		if [ "$(awk '/MemAvailable/ {print int($2/1024)}' /proc/meminfo)" -lt "$min_avail" ]; then
			echo "MemAvailable below $min_avail MiB: stopping the bench (pid $1)" >&2
			kill "$1" 2>/dev/null || true
			return
		fi
	done
}

exec 9>/tmp/herald-bench.lock
echo "== waiting for /tmp/herald-bench.lock"
flock 9
echo "== $conns connections: $nodes herald nodes on one $engine server, $nodes client processes ($(date -u +%FT%TZ))"
echo "== the nodes' pong_timeout: ${NODE_PONG:-90s}; history on the channel: $([ "$history" = 1 ] && echo 'the last 100 events for 1h' || echo none);" \
	"the clients the server closes: $([ "$reconnect" = 1 ] && echo 'come back as pusher-js does' || echo 'stay closed')"
if [ "$engine" = nats ]; then echo "== the nodes' NATS keepalive: a ping every $nats_ping, stale after $nats_pings unanswered"; fi
drops0=$(backlog_drops) retrans0=$(retransmits)
start_bus
for i in $(seq "$nodes"); do start_node "$i"; done
await_nodes
echo "== $nodes nodes ready; bus pid $bus_pid"
sample >"$tmp/samples" &
sampler=$!
pids+=("$sampler")

"$H-bench" fanout --subs "$conns" --procs "$nodes" --concurrency $((8 * nodes)) --timeout 30m \
	--idle "$idle" --idle-fast "$idle_fast" --idle-fast-activity "$idle_fast_activity" \
	--events "$events" --interval "$interval" --wait 90s --quiet "${bench_args[@]}" \
	--ws "$(IFS=,; echo "${ws[*]}")" --rest "http://127.0.0.1:$first_port" \
	--server-pid "$(IFS=,; echo "${np[*]}")" --bus-pid "$bus_pid" >"$tmp/report" 2>&1 &
bench=$!
pids+=("$bench")
guard "$bench" &
pids+=($!)
status=0
wait "$bench" || status=$?
cat "$tmp/report"
echo "bench exit status $status"

kill "$sampler" 2>/dev/null || true
echo "== the kernel over the run: $(($(backlog_drops) - drops0)) packets dropped at a full input backlog (netdev_max_backlog), $(($(retransmits) - retrans0)) TCP segments retransmitted"
echo "== the machine every 5 s (peaks below)"
cat "$tmp/samples"
awk '{for (i=2;i<=NF;i++) {split($i, kv, "="); v=kv[2]+0; k=kv[1];
	if (!(k in hi) || v>hi[k]) hi[k]=v; if (!(k in lo) || v<lo[k]) lo[k]=v}}
	END {printf "peaks: busy %d%%, MemAvailable low %d MiB, Slab high %d MiB, open files high %d, TCP sockets high %d, socket buffers high %d pages, TIME_WAIT high %d\n",
		hi["busy"], lo["avail_mib"], hi["slab_mib"], hi["files"], hi["tcp_inuse"], hi["tcp_mem_pages"], hi["tw"]}' "$tmp/samples"
echo "== bus server: CPU $(awk '{print ($14 + $15) / 100}' "/proc/$bus_pid/stat") s over the whole run, RSS $(awk '/VmRSS/ {print int($2/1024)}' "/proc/$bus_pid/status") MiB"
for log in "$tmp"/node-*.log; do # the development app's warning aside
	warn=$(grep -iE 'level=(ERROR|WARN)' "$log" | grep -v 'DEVELOPMENT CREDENTIALS' || true)
	if [ -n "$warn" ]; then
		echo "-- $(basename "$log"): $(wc -l <<<"$warn") warnings/errors, first: $(head -1 <<<"$warn")"
	fi
done
# The nodes' API ports: connections closed in their HTTP phase (a handshake that did not
# arrive within handshake_timeout, one evicted or refused at max_http_connections).
for m in "${mp[@]}"; do curl -fs "http://127.0.0.1:$m/metrics" || true; done | awk '
	/^herald_http_request_timeouts_total / {to += $2}
	/^herald_http_connections_evicted_total/ {ev += $2}
	/^herald_http_connections_refused_total / {rf += $2}
	/^herald_pong_timeouts_total / {pt += $2}
	/^herald_pongs_unread_total / {pu += $2}
	END {printf "== the nodes\047 API ports: %d requests timed out (handshake_timeout), %d connections evicted, %d refused\n", to, ev, rf
		printf "== the nodes\047 pings: %d connections closed unanswered (4201), %d pong timeouts passed with the client\047s bytes unread in the kernel (kept)\n", pt, pu}'
# Each node logs its 4201 closes (at most one a second) with what it still held for the client.
grep -h 'ping not answered' "$tmp"/node-*.log | head -20 || true
# When the nodes lost their bus: a loss during the fan-out costs a node whole events.
losses=$(grep -h 'cluster bus disconnected' "$tmp"/node-*.log | grep -oE 'time=[^ ]+' | sort || true)
if [ -n "$losses" ]; then
	echo "== bus connections lost: $(wc -l <<<"$losses"), the first $(head -1 <<<"$losses"), the last $(tail -1 <<<"$losses")"
else
	echo "== bus connections lost: none"
fi
bwarn=$(grep -E '\[(WRN|ERR)\]|# WARNING' "$tmp/bus.log" || true)
if [ -n "$bwarn" ]; then
	echo "== bus server log: $(wc -l <<<"$bwarn") warnings/errors; $(grep -c 'Readloop processing time' <<<"$bwarn" || true) read loops slow," \
		"$(grep -ci 'slow consumer' <<<"$bwarn" || true) slow consumers, $(grep -ci 'stale' <<<"$bwarn" || true) stale; first: $(head -1 <<<"$bwarn")"
fi
if [ -n "${LOGS:-}" ]; then
	mkdir -p "$LOGS" && cp "$tmp"/*.log "$tmp/samples" "$tmp/report" "$LOGS"/ && echo "== logs kept in $LOGS"
fi
exit "$status"

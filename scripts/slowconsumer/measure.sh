#!/usr/bin/env bash
# measure.sh BINARY PORT MODE [slowconsumer flags...]: starts herald BINARY on 127.0.0.1:PORT
# (metrics on PORT+1) with its development app and HERALD_FLAGS, runs slowconsumer -mode MODE
# against it, and prints herald's RSS, open descriptors and goroutines, and the kernel's TCP
# memory (all sockets, from /proc/net/sockstat), before, at their peak (sampled every 0.1 s),
# right after and SETTLE (default 10) s after.
set -uo pipefail
bin=$1 port=$2 mode=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
tool=${TOOL:-/tmp/slowconsumer}
[ -x "$tool" ] || go build -o "$tool" "$here"
mport=$((port + 1))
# shellcheck disable=SC2086
# The clients come from a few loopback addresses: the per-address connection limit is off, as in
# the figures recorded with this script (HERALD_FLAGS may turn it on again).
"$bin" --port "$port" --metrics-port "$mport" --log-level warn --connection-rate-per-ip 0 ${HERALD_FLAGS:-} 2>/tmp/herald-slowconsumer.log &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done

rss() { awk '/^VmRSS/ {print $2}' /proc/$pid/status; }
fds() { ls /proc/$pid/fd | wc -l; }
gor() { curl -s "http://127.0.0.1:$mport/metrics" | awk '/^go_goroutines / {print $2}'; }
tcpmem() { awk '/^TCP:/ {for (i = 1; i < NF; i++) if ($i == "mem") print $(i + 1) * 4}' /proc/net/sockstat; } # KiB
snap() { printf '%-10s RSS %6.1f MiB  fds %5d  goroutines %5d  kernel TCP memory %7.1f MiB\n' "$1" \
	"$(echo "$(rss)/1024" | bc -l)" "$(fds)" "$(gor)" "$(echo "$(tcpmem)/1024" | bc -l)"; }

snap before
peak_rss=0 peak_fds=0 peak_g=0 peak_tcp=0
"$tool" -addr "127.0.0.1:$port" -metrics "127.0.0.1:$mport" -mode "$mode" "$@" &
tpid=$!
while kill -0 $tpid 2>/dev/null; do
	r=$(rss) f=$(fds) g=$(gor) k=$(tcpmem)
	((r > peak_rss)) && peak_rss=$r
	((f > peak_fds)) && peak_fds=$f
	((${g:-0} > peak_g)) && peak_g=$g
	((k > peak_tcp)) && peak_tcp=$k
	sleep 0.1
done
wait $tpid
status=$?
printf '%-10s RSS %6.1f MiB  fds %5d  goroutines %5d  kernel TCP memory %7.1f MiB\n' peak \
	"$(echo "$peak_rss/1024" | bc -l)" "$peak_fds" "$peak_g" "$(echo "$peak_tcp/1024" | bc -l)"
snap after
sleep "${SETTLE:-10}"
snap "after ${SETTLE:-10} s"
curl -s "http://127.0.0.1:$mport/metrics" | grep -E '^herald_(node_connections|slow_consumer)' || true
exit $status

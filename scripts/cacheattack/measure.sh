#!/usr/bin/env bash
# measure.sh BINARY PORT MODE [cacheattack flags...]: starts herald BINARY on 127.0.0.1:PORT
# (metrics on PORT+1) with its development app, runs cacheattack -mode MODE against it, and
# prints RSS, open descriptors and goroutines before, at their peak, right after and 30 s
# after, with the cache metrics. Extra herald flags go in HERALD_FLAGS.
set -euo pipefail
bin=$1 port=$2 mode=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
attack=${ATTACK:-/tmp/cacheattack}
[ -x "$attack" ] || go build -o "$attack" "$here"
mport=$((port + 1))
# shellcheck disable=SC2086
# The clients come from a few loopback addresses: the per-address connection limit is off, as in
# the figures recorded with this script (HERALD_FLAGS may turn it on again).
"$bin" --port "$port" --metrics-port "$mport" --log-level warn --connection-rate-per-ip 0 ${HERALD_FLAGS:-} 2>/tmp/herald-measure.log &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done

rss() { awk '/^VmRSS/ {print $2}' /proc/$pid/status; }
fds() { ls /proc/$pid/fd | wc -l; }
gor() { curl -s "http://127.0.0.1:$mport/metrics" | awk '/^go_goroutines / {print $2}'; }
snap() { printf '%-12s RSS %7.1f MiB  fds %5d  goroutines %5d\n' "$1" "$(echo "$(rss)/1024" | bc -l)" "$(fds)" "$(gor)"; }

snap before
peak_rss=0 peak_fds=0 peak_g=0
"$attack" -addr "127.0.0.1:$port" -mode "$mode" "$@" &
apid=$!
while kill -0 $apid 2>/dev/null; do
	r=$(rss) f=$(fds) g=$(gor)
	((r > peak_rss)) && peak_rss=$r
	((f > peak_fds)) && peak_fds=$f
	((g > peak_g)) && peak_g=$g
	sleep 0.1
done
wait $apid
printf '%-12s RSS %7.1f MiB  fds %5d  goroutines %5d  (VmHWM %.1f MiB)\n' peak "$(echo "$peak_rss/1024" | bc -l)" \
	"$peak_fds" "$peak_g" "$(echo "$(awk '/^VmHWM/ {print $2}' /proc/$pid/status)/1024" | bc -l)"
snap after
sleep "${SETTLE:-30}"
snap "after ${SETTLE:-30} s"
curl -s "http://127.0.0.1:$mport/metrics" | grep -E '^herald_(cache_|connected|channels)' || true

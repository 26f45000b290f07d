#!/usr/bin/env bash
# measure.sh BINARY PORT [herald flags...]: starts herald BINARY on 127.0.0.1:PORT (metrics on
# PORT+1), runs the slow-body attack against it from one process (19,990 sockets by
# default, CONNS to change) while a second process probes /health, /metrics, a new WebSocket
# client and a signed publish every second, and prints the server's RSS, open descriptors and
# goroutines before, at their peak (sampled every 0.2 s), right after and SETTLE s after.
set -uo pipefail
bin=$1 port=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
tool=${TOOL:-/tmp/slowbody}
[ -x "$tool" ] || go build -o "$tool" "$here"
mport=$((port + 1))
hold=${HOLD:-40s}
# The clients come from a few loopback addresses: the per-address connection limit is off, as in
# the figures recorded with this script (a flag given may turn it on again).
"$bin" --port "$port" --metrics-port "$mport" --log-level warn --connection-rate-per-ip 0 "$@" 2>/tmp/herald-slowbody.log &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done

rss() { awk '/^VmRSS/ {print $2}' /proc/$pid/status; }
fds() { ls /proc/$pid/fd | wc -l; }
gor() { curl -s -m 1 "http://127.0.0.1:$mport/metrics" | awk '/^go_goroutines / {print $2}'; }
snap() { printf '%-12s RSS %7.1f MiB  fds %5d  goroutines %5s\n' "$1" "$(echo "$(rss)/1024" | bc -l)" "$(fds)" "$(gor)"; }

snap before
"$tool" -role probe -addr "127.0.0.1:$port" -metrics "http://127.0.0.1:$mport/metrics" -every 1s -hold "$hold" >/tmp/slowbody-probe.txt 2>&1 &
ppid=$!
"$tool" -role attack -addr "127.0.0.1:$port" -conns "${CONNS:-19990}" -hold "$hold" >/tmp/slowbody-attack.txt 2>&1 &
apid=$!
peak_rss=0 peak_fds=0 peak_g=0 nog=0
while kill -0 $apid 2>/dev/null; do
	r=$(rss) f=$(fds) g=$(gor)
	((r > peak_rss)) && peak_rss=$r
	((f > peak_fds)) && peak_fds=$f
	if [ -z "$g" ]; then nog=$((nog + 1)); elif ((g > peak_g)); then peak_g=$g; fi
	sleep 0.2
done
wait $apid
wait $ppid
printf '%-12s RSS %7.1f MiB  fds %5d  goroutines %5d  (VmHWM %.1f MiB; metrics unanswered in %d samples)\n' peak "$(echo "$peak_rss/1024" | bc -l)" \
	"$peak_fds" "$peak_g" "$(echo "$(awk '/^VmHWM/ {print $2}' /proc/$pid/status)/1024" | bc -l)" "$nog"
snap after
sleep "${SETTLE:-15}"
snap "after ${SETTLE:-15} s"
echo "--- attack"; cat /tmp/slowbody-attack.txt | awk 'NR<=5 || NR%10==0' ; tail -1 /tmp/slowbody-attack.txt
echo "--- probe"; tail -4 /tmp/slowbody-probe.txt
echo "--- server log: $(wc -l </tmp/herald-slowbody.log) lines"; sort /tmp/herald-slowbody.log | cut -c 30-140 | uniq -c | sort -rn | head -5
curl -s -m 2 "http://127.0.0.1:$mport/metrics" | grep -E '^herald_(http_conn|max_http|http_accept)' || true

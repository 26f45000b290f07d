#!/usr/bin/env bash
# dupes.sh BINARY PORT CONNS: starts herald BINARY on 127.0.0.1:PORT (metrics on PORT+1),
# has CONNS subscribers of one channel receive one event that names it 100 times, and prints the
# server's RSS, descriptors and goroutines before, at their peak and after, and the copies received.
here=$(cd "$(dirname "$0")" && pwd)
tool=${TOOL:-/tmp/slowbody}
[ -x "$tool" ] || go build -o "$tool" "$here"
bin=$1 port=$2 n=$3 mport=$((port+1))
# The clients come from a few loopback addresses: the per-address connection limit is off, as in
# the figures recorded with this script.
"$bin" --port $port --metrics-port $mport --log-level warn --connection-rate-per-ip 0 2>/dev/null &
pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done
rss() { awk '/^VmRSS/ {print $2}' /proc/$pid/status; }
fds() { ls /proc/$pid/fd | wc -l; }
gor() { curl -s -m 1 "http://127.0.0.1:$mport/metrics" | awk '/^go_goroutines / {print $2}'; }
sent() { curl -s -m 1 "http://127.0.0.1:$mport/metrics" | awk '/^herald_socket_transmitted_bytes/ {s+=$2} END {print s}'; }
snap() { printf '%-8s RSS %6.1f MiB  fds %5d  goroutines %4s  bytes sent %s\n' "$1" "$(echo "$(rss)/1024" | bc -l)" "$(fds)" "$(gor)" "$(sent)"; }
snap before
"$tool" -role dupes -addr 127.0.0.1:$port -conns $n -c 200 > /tmp/slowbody-dupes.txt 2>&1 &
apid=$!
pr=0 pf=0 pg=0
while kill -0 $apid 2>/dev/null; do r=$(rss) f=$(fds) g=$(gor); ((r>pr)) && pr=$r; ((f>pf)) && pf=$f; [ -n "$g" ] && ((g>pg)) && pg=$g; sleep 0.1; done
printf '%-8s RSS %6.1f MiB  fds %5d  goroutines %4d\n' peak "$(echo "$pr/1024" | bc -l)" $pf $pg
sleep 3
snap after
cat /tmp/slowbody-dupes.txt
kill $pid

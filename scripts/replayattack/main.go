// Command replayattack measures what recoveries can cost a running herald, for the figures in
// docs/benchmarks-archive.md:
//
//	-mode flood: -conns connections from -from that subscribe with recover from the start of
//	             a history channel holding -history events of -bytes, and unsubscribe, in a
//	             loop, and never read (reconnecting when herald closes them), for -duration;
//	             meanwhile an honest client from -honest-from recovers every 5 s and reads
//	             the live events published at -rate per second, whose latency it measures.
//	-mode churn: one connection subscribing to a history channel and leaving it -churn times
//	             a second for -duration, while a probe PINGs the Redis server -redis every
//	             10 ms (its P99 before and during).
//
// Both sample the server process (-pid) from /proc: its CPU above its idle level and its RSS,
// and read -metrics before and after. It prints one report; it exits non-zero when the
// honest client missed, repeated or reordered an event.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/pusher"
)

type options struct {
	addr, from, honestFrom, channel, metrics, redis, mode string
	app                                                   herald.App
	conns, history, size, pid, churn                      int
	rate                                                  float64
	duration, idle                                        time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.mode, "mode", "flood", "flood or churn")
	flag.StringVar(&o.addr, "addr", "127.0.0.1:6001", "herald's host:port")
	flag.StringVar(&o.app.ID, "app-id", "app-id", "app id")
	flag.StringVar(&o.app.Key, "app-key", "app-key", "app key")
	flag.StringVar(&o.app.Secret, "app-secret", "app-secret", "app secret")
	flag.StringVar(&o.channel, "channel", "auction-attack", "the history channel")
	flag.StringVar(&o.from, "from", "127.0.0.1", "the attacking connections' source address")
	flag.StringVar(&o.honestFrom, "honest-from", "127.0.0.2", "the honest client's source address")
	flag.StringVar(&o.metrics, "metrics", "", "herald's /metrics URL, read before and after (empty: none)")
	flag.StringVar(&o.redis, "redis", "", "churn: the Redis server's host:port to PING")
	flag.IntVar(&o.conns, "conns", 100, "flood: attacking connections")
	flag.IntVar(&o.history, "history", 1000, "flood: events published to the channel before the attack")
	flag.IntVar(&o.size, "bytes", 10000, "flood: bytes of each event's data")
	flag.IntVar(&o.pid, "pid", 0, "herald's process id, sampled from /proc (0: not sampled)")
	flag.IntVar(&o.churn, "churn", 50, "churn: subscriptions a second")
	flag.Float64Var(&o.rate, "rate", 20, "flood: live events a second during the attack")
	flag.DurationVar(&o.duration, "duration", 30*time.Second, "how long the attack lasts")
	flag.DurationVar(&o.idle, "idle", 5*time.Second, "how long the idle levels are measured first")
	flag.Parse()
	var err error
	switch o.mode {
	case "flood":
		err = flood(o)
	case "churn":
		err = churn(o)
	default:
		err = fmt.Errorf("-mode %q: flood or churn", o.mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "replayattack:", err)
		os.Exit(1)
	}
}

// publish sends events of channel through the REST API, 10 to a batch_events call, each
// event's data {"n":i,"t":unix ns,"pad":...}.
func publish(o options, from, to int, pad string) error {
	for n := from; n <= to; n += 10 {
		var batch []map[string]string
		for k := n; k <= min(n+9, to); k++ {
			batch = append(batch, map[string]string{"channel": o.channel, "name": "bid",
				"data": fmt.Sprintf(`{"n":%d,"t":%d,"pad":"%s"}`, k, time.Now().UnixNano(), pad)})
		}
		body, _ := json.Marshal(map[string]any{"batch": batch})
		path := "/apps/" + o.app.ID + "/batch_events"
		q := pusher.SignRequest(&o.app, "POST", path, nil, body, time.Now())
		resp, err := http.Post("http://"+o.addr+path+"?"+q.Encode(), "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("publish %d: status %d", n, resp.StatusCode)
		}
	}
	return nil
}

// dial connects to the app from source address ip.
func dial(o options, ip string) (*wstest.Client, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	nc, err := d.Dial("tcp", o.addr)
	if err != nil {
		return nil, err
	}
	c, err := wstest.Handshake(nc, o.addr, "/app/"+o.app.Key+"?protocol=7")
	if err != nil {
		nc.Close()
		return nil, err
	}
	if _, err := c.SocketID(10 * time.Second); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func subscribeMsg(channel string, p *herald.Position) []byte {
	d := map[string]any{"channel": channel}
	if p != nil {
		d["recover"] = map[string]any{"epoch": p.Epoch, "offset": p.Offset}
	}
	b, _ := json.Marshal(map[string]any{"event": "pusher:subscribe", "data": d})
	return b
}

// frame is one masked text frame (zero mask) of payload.
func frame(payload []byte) []byte {
	h := []byte{0x81}
	switch n := len(payload); {
	case n < 126:
		h = append(h, 0x80|byte(n))
	default:
		h = append(h, 0x80|126, byte(n>>8), byte(n))
	}
	return append(append(h, 0, 0, 0, 0), payload...)
}

// proc samples a process's CPU time (seconds) and RSS (bytes).
func proc(pid int) (cpu float64, rss int64) {
	if pid == 0 {
		return 0, 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err == nil {
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		u, _ := strconv.ParseFloat(f[11], 64)
		s, _ := strconv.ParseFloat(f[12], 64)
		cpu = (u + s) / 100 // USER_HZ
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				rss = kb << 10
			}
		}
	}
	return cpu, rss
}

// sampler records a process's RSS peak from now until stop.
type sampler struct {
	pid     int
	peak    atomic.Int64
	stop    chan struct{}
	stopped sync.WaitGroup
}

func sample(pid int) *sampler {
	s := &sampler{pid: pid, stop: make(chan struct{})}
	s.stopped.Add(1)
	go func() {
		defer s.stopped.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if _, rss := proc(pid); rss > s.peak.Load() {
				s.peak.Store(rss)
			}
			select {
			case <-t.C:
			case <-s.stop:
				return
			}
		}
	}()
	return s
}

func (s *sampler) end() int64 { close(s.stop); s.stopped.Wait(); return s.peak.Load() }

// metrics returns the herald_ series of url whose names contain one of names, by their line's
// name and labels.
func metrics(url string, names ...string) map[string]float64 {
	out := map[string]float64{}
	if url == "" {
		return out
	}
	resp, err := http.Get(url)
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "#") {
			continue
		}
		for _, n := range names {
			if strings.Contains(l, n) {
				i := strings.LastIndexByte(l, ' ')
				v, _ := strconv.ParseFloat(l[i+1:], 64)
				out[l[:i]] = v
			}
		}
	}
	return out
}

func diff(before, after map[string]float64) string {
	var keys []string
	for k := range after {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		if d := after[k] - before[k]; d != 0 {
			fmt.Fprintf(&b, "  %s +%.0f\n", k, d)
		}
	}
	return b.String()
}

func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

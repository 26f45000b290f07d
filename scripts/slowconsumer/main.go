// Command slowconsumer reproduces the slow-consumer and stalled-frame cases against a
// running herald, for the measurements in docs/benchmarks-archive.md:
//
//	-mode nonreading: -n clients join one channel and stop reading; signed REST publishes
//	                  of -bytes each, one every -pace, go on until herald has cut all of
//	                  them off as slow consumers; once herald has let go of them, the clients
//	                  read what the kernel holds and report how their streams ended
//	-mode slowread:   the same with clients that read at -rate bytes per second throughout
//	-mode stall:      -n clients each send a frame header announcing 65,536 bytes and 100 of
//	                  them, then wait for herald to close the connection
//
// It prints what happened and exits non-zero when a client's stream did not end the way the
// issue asks (4100 after a pusher:error; 1008 for a stalled frame).
package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/pusher"
)

var (
	addr    = flag.String("addr", "127.0.0.1:6001", "herald's host:port")
	metrics = flag.String("metrics", "127.0.0.1:9601", "herald's metrics host:port")
	mode    = flag.String("mode", "nonreading", "nonreading, slowread or stall")
	n       = flag.Int("n", 1000, "clients")
	size    = flag.Int("bytes", 4000, "bytes of each event's data")
	pace    = flag.Duration("pace", 10*time.Millisecond, "time between publishes")
	rate    = flag.Int("rate", 20000, "slowread: bytes per second each client reads")
	limit   = flag.Duration("timeout", 240*time.Second, "longest each phase may take")
	app     = &herald.App{ID: "app-id", Key: "app-key", Secret: "app-secret"}
)

func main() {
	flag.Parse()
	var ok bool
	switch *mode {
	case "nonreading", "slowread":
		ok = slow(*mode == "slowread")
	case "stall":
		ok = stall()
	default:
		fmt.Fprintln(os.Stderr, "unknown -mode", *mode)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

// slow floods subscribers until herald cuts them all off, then reads how their streams end.
func slow(reading bool) bool {
	channel := "slow-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	var wrap func(net.Conn) net.Conn
	if reading {
		wrap = func(nc net.Conn) net.Conn { return &slowConn{Conn: nc, rate: *rate, start: time.Now()} }
	}
	baseSlow := metric("herald_slow_consumer_disconnections_total")
	clients := dial(channel, wrap)
	fmt.Printf("%d clients subscribed to %s\n", len(clients), channel)
	ends := make(chan []ending, 1)
	if reading {
		go func() { ends <- readAll(clients) }()
	}
	start := time.Now()
	data := strings.Repeat("x", *size)
	sent := 0
	for metric("herald_slow_consumer_disconnections_total")-baseSlow < float64(len(clients)) {
		if time.Since(start) > *limit {
			fmt.Printf("FAIL: %v after %d events, %.0f of %d cut off\n", *limit, sent,
				metric("herald_slow_consumer_disconnections_total")-baseSlow, len(clients))
			return false
		}
		if publish(channel, data) == nil {
			sent++
		}
		time.Sleep(*pace) // the publisher's pace
	}
	cut := time.Now()
	fmt.Printf("all %d cut off after %d events (%d bytes of data each) in %v\n", len(clients), sent, *size,
		cut.Sub(start).Round(time.Millisecond))
	for metric("herald_node_connections") > 0 && time.Since(cut) < *limit {
		time.Sleep(100 * time.Millisecond) // polling herald's count
	}
	fmt.Printf("herald held %.0f connections %v after the last cut-off\n", metric("herald_node_connections"),
		time.Since(cut).Round(time.Millisecond))
	var got []ending
	if reading {
		got = <-ends
	} else {
		got = readAll(clients)
	}
	last := cut
	for _, e := range got {
		if e.at.After(last) {
			last = e.at
		}
	}
	fmt.Printf("streams ended (last %v after the last cut-off): %s\n", last.Sub(cut).Round(time.Millisecond), summary(got))
	for _, c := range clients {
		c.Close()
	}
	for _, e := range got {
		if e.err != nil || e.code != 4100 || e.before != "pusher:error" {
			return false
		}
	}
	return true
}

// stall sends each client's stalled frame and waits for herald to close the connections.
func stall() bool {
	clients := dial("stall", nil)
	frame := append([]byte{0x81, 0x80 | 127}, binary.BigEndian.AppendUint64(nil, 65536)...)
	frame = append(frame, 1, 2, 3, 4)
	frame = append(frame, make([]byte, 100)...)
	start := time.Now()
	for _, c := range clients {
		if _, err := c.Conn.Write(frame); err != nil {
			fmt.Println("write:", err)
			return false
		}
	}
	fmt.Printf("%d clients sent a frame announcing 65,536 bytes and 100 of them\n", len(clients))
	got := readAll(clients)
	var first, last time.Duration
	for i, e := range got {
		d := e.at.Sub(start)
		if i == 0 || d < first {
			first = d
		}
		last = max(last, d)
	}
	fmt.Printf("closed %v to %v after the frames started: %s\n", first.Round(time.Millisecond), last.Round(time.Millisecond), summary(got))
	for _, c := range clients {
		c.Close()
	}
	for _, e := range got {
		if e.err != nil || e.code != 1008 {
			return false
		}
	}
	return true
}

// dial opens -n connections subscribed to channel, 32 at a time.
func dial(channel string, wrap func(net.Conn) net.Conn) []*wstest.Client {
	clients := make([]*wstest.Client, *n)
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []error
	for i := range clients {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			c, err := subscriber(channel, wrap)
			if err != nil {
				mu.Lock()
				failed = append(failed, err)
				mu.Unlock()
				return
			}
			clients[i] = c
		}()
	}
	wg.Wait()
	if len(failed) > 0 {
		fmt.Printf("FAIL: %d of %d clients did not connect; first: %v\n", len(failed), *n, failed[0])
		os.Exit(1)
	}
	return clients
}

func subscriber(channel string, wrap func(net.Conn) net.Conn) (*wstest.Client, error) {
	nc, err := net.DialTimeout("tcp", *addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	if wrap != nil {
		nc = wrap(nc)
	}
	c, err := wstest.Handshake(nc, *addr, "/app/"+app.Key+"?protocol=7")
	if err != nil {
		nc.Close()
		return nil, err
	}
	if _, err := c.SocketID(10 * time.Second); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.Subscribe(channel, "", ""); err != nil {
		c.Close()
		return nil, err
	}
	if _, err := c.Expect("pusher_internal:subscription_succeeded", 10*time.Second); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// ending is how one client's stream ended.
type ending struct {
	code   int
	before string
	events int
	err    error
	at     time.Time
}

func (e ending) String() string {
	if e.err != nil {
		s := e.err.Error()
		for _, k := range []string{"EOF", "connection reset", "i/o timeout", "bad JSON"} {
			if strings.Contains(s, k) {
				return k
			}
		}
		return s
	}
	return fmt.Sprintf("close %d after %s", e.code, e.before)
}

func readAll(clients []*wstest.Client) []ending {
	ends := make([]ending, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := &ends[i]
			for {
				m, err := c.Read(*limit)
				if err != nil {
					e.err = err
					break
				}
				if m.Close != 0 {
					e.code = m.Close
					break
				}
				e.events++
				e.before = m.Event
			}
			e.at = time.Now()
		}()
	}
	wg.Wait()
	return ends
}

func summary(ends []ending) string {
	count := map[string]int{}
	events := 0
	for _, e := range ends {
		count[e.String()]++
		events += e.events
	}
	var kinds []string
	for k := range count {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool { return count[kinds[i]] > count[kinds[j]] })
	var b strings.Builder
	for _, k := range kinds {
		fmt.Fprintf(&b, "%s: %d; ", k, count[k])
	}
	fmt.Fprintf(&b, "%d events read per client on average", events/max(len(ends), 1))
	return b.String()
}

// slowConn reads at most rate bytes per second.
type slowConn struct {
	net.Conn
	rate  int
	start time.Time
	got   int
}

func (s *slowConn) Read(p []byte) (int, error) {
	if len(p) > 1024 {
		p = p[:1024]
	}
	if ahead := time.Duration(s.got)*time.Second/time.Duration(s.rate) - time.Since(s.start); ahead > 0 {
		time.Sleep(ahead) // the client's reading pace
	}
	k, err := s.Conn.Read(p)
	s.got += k
	return k, err
}

func publish(channel, data string) error {
	body, _ := json.Marshal(map[string]any{"name": "flood", "channel": channel, "data": data})
	path := "/apps/" + app.ID + "/events"
	q := pusher.SignRequest(app, "POST", path, nil, body, time.Now())
	resp, err := http.Post("http://"+*addr+path+"?"+q.Encode(), "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// metric sums the samples of one metric on herald's metrics listener (-1 if unreachable).
func metric(name string) float64 {
	resp, err := http.Get("http://" + *metrics + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != ' ' && line[len(name)] != '{') {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			sum += v
		}
	}
	return sum
}

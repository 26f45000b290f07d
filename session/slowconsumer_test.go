package session_test

import (
	"fmt"
	"net"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/session"
)

// These tests check the slow-consumer rule (docs/architecture.md rule 7) over real sockets: once a connection is cut
// off nothing more is queued for it, queued frames that have not reached the kernel are
// dropped (a frame cut mid-write is completed first), and the close frame goes next, so a
// client that reads, even slowly or only later, finds 4100 right after the frames already in
// the kernel rather than a dropped connection (1006 in a browser).

// internetDialer dials with an Internet-sized MSS (1460 bytes). On loopback the MSS is about
// 64 KiB, larger than the window a drained receive buffer opens, so the receiver's kernel
// withholds the window update (silly-window avoidance) and the sender learns of the room only
// from its zero-window probes, which back off to tens of seconds: 300 of 1,000 clients that
// started reading after their cut-off timed out that way on a busy machine. With a real MSS
// the window update goes out as soon as the client reads, as it does across a network.
var internetDialer = net.Dialer{
	Timeout: 30 * time.Second,
	Control: func(network, address string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = setMSS(fd, 1460)
		}); err != nil {
			return err
		}
		return serr
	},
}

// dialSubscribers opens n connections subscribed to channel, 16 at a time; wrap, when not
// nil, wraps each dialled socket.
func dialSubscribers(t *testing.T, addr, channel string, n int, wrap func(net.Conn) net.Conn) []*wstest.Client {
	t.Helper()
	clients := make([]*wstest.Client, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			nc, err := internetDialer.Dial("tcp", addr)
			if err != nil {
				errs <- err
				return
			}
			if wrap != nil {
				nc = wrap(nc)
			}
			c, err := wstest.Handshake(nc, addr, "/app/app-key?protocol=7")
			if err != nil {
				nc.Close()
				errs <- err
				return
			}
			clients[i] = c
			if _, err := c.SocketID(10 * time.Second); err != nil {
				errs <- err
				return
			}
			if err := c.Subscribe(channel, "", ""); err != nil {
				errs <- err
				return
			}
			if _, err := c.Expect("pusher_internal:subscription_succeeded", 10*time.Second); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range clients {
			if c != nil {
				c.Close()
			}
		}
	})
	close(errs)
	if err := <-errs; err != nil {
		t.Fatalf("connecting %d subscribers: %v", n, err)
	}
	return clients
}

// flood publishes events of size bytes to channel until want more connections have been cut
// off as slow consumers. Each event waits for the workers to have taken the previous one, so
// that connections are cut off because their sockets stopped taking bytes, not because one
// batch of publishes outran a flush; pace, when not 0, spaces them further.
func flood(t *testing.T, h *session.Server, channel string, size int, pace time.Duration, want int64) {
	t.Helper()
	before := h.Stats().SlowConsumers
	data := strings.Repeat("x", size)
	deadline := time.Now().Add(90 * time.Second)
	for i := 0; h.Stats().SlowConsumers-before < want; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("flooding %s: %d of %d subscribers cut off as slow consumers after %d events",
				channel, h.Stats().SlowConsumers-before, want, i)
		}
		// A CodeBusy refusal (worker queues full) is the publisher's back-off: try again.
		_ = h.Publish(app.ID, herald.Event{Name: "flood", Channel: channel, Data: data})
		for !slices.Equal(h.QueueDepths(), make([]int, h.Workers())) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Microsecond) // polling the workers' queues
		}
		if pace > 0 {
			time.Sleep(pace) // the publisher's pace, not a wait for a result
		}
	}
}

// ending is how one client's stream ended.
type ending struct {
	code   int    // close code read, 0 if none
	before string // the event read just before the close frame
	events int    // events read
	err    error  // the read error instead of a close frame
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

// readToEnd reads every client until a close frame or an error, concurrently.
func readToEnd(clients []*wstest.Client, d time.Duration) []ending {
	ends := make([]ending, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := &ends[i]
			for {
				m, err := c.Read(d)
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

// summary counts endings by kind, most common first.
func summary(ends []ending) string {
	n := map[string]int{}
	for _, e := range ends {
		n[e.String()]++
	}
	var kinds []string
	for k := range n {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool { return n[kinds[i]] > n[kinds[j]] })
	var b strings.Builder
	for _, k := range kinds {
		fmt.Fprintf(&b, "%s: %d; ", k, n[k])
	}
	return b.String()
}

// expect4100 fails unless every client read a pusher:error then a 4100 close frame.
func expect4100(t *testing.T, ends []ending) {
	t.Helper()
	ok := 0
	for _, e := range ends {
		if e.err == nil && e.code == 4100 && e.before == "pusher:error" {
			ok++
		}
	}
	if ok != len(ends) {
		var bad []string
		for i, e := range ends {
			if (e.err != nil || e.code != 4100) && len(bad) < 5 {
				bad = append(bad, fmt.Sprintf("client %d: %v after %d events (last %q)", i, e, e.events, e.before))
			}
		}
		t.Fatalf("%d of %d clients read pusher:error then close 4100; endings: %s; first others: %s",
			ok, len(ends), summary(ends), strings.Join(bad, "; "))
	}
}

// backToBaseline waits for the server's counters, the goroutines and the descriptors to return to
// where they were before the clients connected.
func backToBaseline(t *testing.T, h *session.Server, baseG, baseFD int) {
	t.Helper()
	poll.Until(t, 20*time.Second, "back to baseline", func() (bool, string) {
		st := h.Stats()
		g, fd := runtime.NumGoroutine(), openFDs()
		return st.Connections == 0 && st.Channels == 0 && g <= baseG && fd <= baseFD,
			fmt.Sprintf("connections=%d channels=%d goroutines=%d (baseline %d) fds=%d (baseline %d)",
				st.Connections, st.Channels, g, baseG, fd, baseFD)
	})
}

// TestNonReadingSlowConsumersGet4100 floods 1,000 subscribers that do not read until all are
// cut off and the server has let go of them, then reads them: each must find, after the
// frames already in the kernel (whole frames), a pusher:error and a 4100 close frame.
func TestNonReadingSlowConsumersGet4100(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 1,000 connections")
	}
	const n = 1000
	h, addr := startServer(t, session.Config{Workers: 2, OutboundBufferBytes: 64 << 10})
	baseG, baseFD := runtime.NumGoroutine(), openFDs()
	clients := dialSubscribers(t, addr, "flood", n, nil)

	flood(t, h, "flood", 4000, 0, n)
	poll.Until(t, 30*time.Second, "the server to release every slow consumer", func() (bool, string) {
		st := h.Stats()
		return st.Connections == 0, fmt.Sprintf("%d connections open", st.Connections)
	})

	// The clients dialled with a 1460-byte MSS (internetDialer), so reading announces the
	// open window at once; the deadline is for a busy machine.
	ends := readToEnd(clients, 60*time.Second)
	expect4100(t, ends)
	events, fewest := 0, ends[0].events
	for _, e := range ends {
		events += e.events
		fewest = min(fewest, e.events)
	}
	t.Logf("%d clients read %d events on average (fewest %d) from the kernel, then 4100", n, events/n, fewest)
	if fewest < 10 {
		t.Fatalf("a client read only %d events before its 4100: its socket was not full, the test did not test a slow consumer", fewest)
	}
	for _, c := range clients {
		c.Close()
	}
	backToBaseline(t, h, baseG, baseFD)
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
		time.Sleep(ahead) // the client's reading pace, not a wait for a result
	}
	n, err := s.Conn.Read(p)
	s.got += n
	return n, err
}

// TestSlowReadersGet4100 floods 20 subscribers that read at about 20 KB/s each until all are
// cut off: each must go on to read a pusher:error and 4100 close frame, not a dropped
// connection.
func TestSlowReadersGet4100(t *testing.T) {
	if testing.Short() {
		t.Skip("reads at 20 KB/s for several seconds")
	}
	const n, rate = 20, 20_000
	h, addr := startServer(t, session.Config{Workers: 2, OutboundBufferBytes: 256 << 10})
	baseG, baseFD := runtime.NumGoroutine(), openFDs()
	clients := dialSubscribers(t, addr, "slow-readers", n, func(nc net.Conn) net.Conn {
		return &slowConn{Conn: nc, rate: rate, start: time.Now()}
	})
	read := make(chan []ending, 1)
	go func() { read <- readToEnd(clients, 60*time.Second) }()

	flood(t, h, "slow-readers", 2000, time.Millisecond, n)
	cut := time.Now()
	ends := <-read
	for _, c := range clients {
		c.Close()
	}
	expect4100(t, ends)
	var last time.Time
	for _, e := range ends {
		if e.at.After(last) {
			last = e.at
		}
	}
	t.Logf("%d clients reading at %d B/s: the last read its 4100 %v after the last was cut off", n, rate,
		last.Sub(cut).Round(time.Millisecond))
	backToBaseline(t, h, baseG, baseFD)
}

package main

import (
	"bufio"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// pinger PINGs a Redis server every 10 ms and records the round trips.
type pinger struct {
	c    net.Conn
	r    *bufio.Reader
	rtts []time.Duration
}

func newPinger(addr string) (*pinger, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &pinger{c: c, r: bufio.NewReader(c)}, nil
}

// run PINGs until end and returns the round trips, sorted.
func (p *pinger) run(end time.Time) ([]time.Duration, error) {
	p.rtts = p.rtts[:0]
	for time.Now().Before(end) {
		t := time.Now()
		if _, err := p.c.Write([]byte("PING\r\n")); err != nil {
			return nil, err
		}
		if l, err := p.r.ReadString('\n'); err != nil || !strings.HasPrefix(l, "+PONG") {
			return nil, fmt.Errorf("PING: %q %v", l, err)
		}
		p.rtts = append(p.rtts, time.Since(t))
		time.Sleep(10 * time.Millisecond) // the probe's interval
	}
	out := slices.Clone(p.rtts)
	slices.Sort(out)
	return out, nil
}

// commandStats returns Redis's calls of the history commands so far (INFO commandstats).
func (p *pinger) commandStats() (map[string]int64, error) {
	if _, err := p.c.Write([]byte("INFO commandstats\r\n")); err != nil {
		return nil, err
	}
	head, err := p.r.ReadString('\n') // $<len>
	if err != nil || !strings.HasPrefix(head, "$") {
		return nil, fmt.Errorf("INFO: %q %v", head, err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(head[1:]))
	buf := make([]byte, n+2)
	if _, err := ioReadFull(p.r, buf); err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, l := range strings.Split(string(buf), "\r\n") {
		name, rest, ok := strings.Cut(l, ":calls=")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		v, _ := strconv.ParseInt(calls, 10, 64)
		out[strings.TrimPrefix(name, "cmdstat_")] = v
	}
	return out, nil
}

func ioReadFull(r *bufio.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := r.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func churn(o options) error {
	if o.redis == "" {
		return fmt.Errorf("churn needs -redis")
	}
	p, err := newPinger(o.redis)
	if err != nil {
		return err
	}
	defer p.c.Close()
	if err := publish(o, 1, o.history, strings.Repeat("x", max(o.size-40, 0))); err != nil { // the history a load reads
		return err
	}
	cpu0, _ := proc(o.pid)
	idleRTT, err := p.run(time.Now().Add(o.idle))
	if err != nil {
		return err
	}
	cpu1, _ := proc(o.pid)
	statsBefore, err := p.commandStats()
	if err != nil {
		return err
	}
	before := metrics(o.metrics, "history_loads", "subscriptions_rate_limited")

	c, err := dial(o, o.from)
	if err != nil {
		return err
	}
	defer c.Close()
	var read, closed atomic.Int64
	entered := make(chan struct{}, 1)
	go func() { // reads everything, so the connection is never a slow consumer
		for {
			m, err := c.Read(time.Hour)
			if err != nil {
				return
			}
			if m.Close != 0 {
				closed.Store(int64(m.Close))
				return
			}
			read.Add(1)
			if m.Event == "pusher_internal:subscription_succeeded" {
				entered <- struct{}{}
			}
		}
	}()
	end := time.Now().Add(o.duration)
	done := make(chan error, 1)
	var sent int
	go func() {
		sub := frame(subscribeMsg(o.channel, nil))
		unsub := frame([]byte(`{"event":"pusher:unsubscribe","data":{"channel":"` + o.channel + `"}}`))
		tick := time.NewTicker(time.Duration(float64(time.Second) / float64(o.churn)))
		defer tick.Stop()
		for time.Now().Before(end) {
			if _, err := c.Conn.Write(sub); err != nil {
				done <- err
				return
			}
			select { // each subscription enters its channel before it leaves
			case <-entered:
			case <-time.After(10 * time.Second):
				done <- fmt.Errorf("no subscription_succeeded within 10 s")
				return
			}
			if _, err := c.Conn.Write(unsub); err != nil {
				done <- err
				return
			}
			sent++
			<-tick.C
		}
		done <- nil
	}()
	busyRTT, err := p.run(end)
	if err != nil {
		return err
	}
	cpu2, _ := proc(o.pid)
	if err := <-done; err != nil {
		return fmt.Errorf("churn connection: %w", err)
	}
	statsAfter, err := p.commandStats()
	if err != nil {
		return err
	}
	after := metrics(o.metrics, "history_loads", "subscriptions_rate_limited")
	fmt.Printf("churn: one connection subscribing to %s (%d events of %d bytes) and leaving it, at most %d times a second for %v: %d subscriptions entered and left, %d frames read, closed %d\n",
		o.channel, o.history, o.size, o.churn, o.duration, sent, read.Load(), closed.Load())
	fmt.Printf("  Redis PING: idle P50 %v P99 %v (%d), during P50 %v P99 %v max %v (%d)\n",
		pct(idleRTT, .5).Round(time.Microsecond), pct(idleRTT, .99).Round(time.Microsecond), len(idleRTT),
		pct(busyRTT, .5).Round(time.Microsecond), pct(busyRTT, .99).Round(time.Microsecond), pct(busyRTT, 1).Round(time.Microsecond), len(busyRTT))
	var cmds []string
	for k, v := range statsAfter {
		if d := v - statsBefore[k]; d > 0 && k != "ping" && k != "info" {
			cmds = append(cmds, fmt.Sprintf("%s %d", k, d))
		}
	}
	slices.Sort(cmds)
	fmt.Printf("  Redis commands during the churn: %s\n", strings.Join(cmds, ", "))
	if o.pid != 0 {
		fmt.Printf("  server CPU: idle %.1f%% of a core, during %.1f%%\n", 100*(cpu1-cpu0)/o.idle.Seconds(), 100*(cpu2-cpu1)/o.duration.Seconds())
	}
	if d := diff(before, after); d != "" {
		fmt.Printf("  metrics:\n%s", d)
	}
	return nil
}

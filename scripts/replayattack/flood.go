package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/pusher"
)

// epochOf reads the channel's epoch from the REST history endpoint.
func epochOf(o options) (string, error) {
	path := "/apps/" + o.app.ID + "/channels/" + o.channel + "/history"
	q := pusher.SignRequest(&o.app, "GET", path, map[string][]string{"limit": {"1"}}, nil, time.Now())
	resp, err := http.Get("http://" + o.addr + path + "?" + q.Encode())
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var page struct {
		Epoch string `json:"epoch"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("history: status %d, %v", resp.StatusCode, err)
	}
	return page.Epoch, nil
}

func flood(o options) error {
	pad := strings.Repeat("x", max(o.size-40, 0))
	if err := publish(o, 1, o.history, pad); err != nil {
		return err
	}
	epoch, err := epochOf(o)
	if err != nil {
		return err
	}
	cpu0, rss0 := proc(o.pid)
	time.Sleep(o.idle) // the idle level
	cpu1, rssIdle := proc(o.pid)
	idleCPU := (cpu1 - cpu0) / o.idle.Seconds()
	rssIdle = max(rssIdle, rss0)
	before := metrics(o.metrics, "replay", "recoveries_total", "slow_consumer", "subscriptions_rate_limited")

	deadline := time.Now().Add(o.duration)
	var pairs, dials, dialErrs atomic.Int64
	var latest atomic.Int64 // the channel's last offset, as the publisher knows it
	latest.Store(int64(o.history))
	unsub := frame([]byte(`{"event":"pusher:unsubscribe","data":{"channel":"` + o.channel + `"}}`))
	// Each recovery asks for all but the 100 newest of the events kept: as large a replay as
	// the history holds, and still kept when it arrives while live events push the oldest out.
	pairAt := func() []byte {
		from := herald.Position{Epoch: epoch, Offset: uint64(max(latest.Load()-int64(o.history)+100, 0))}
		return append(frame(subscribeMsg(o.channel, &from)), unsub...)
	}
	var wg sync.WaitGroup
	for range o.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				dials.Add(1)
				c, err := dial(o, o.from)
				if err != nil {
					dialErrs.Add(1)
					time.Sleep(100 * time.Millisecond) // a refused attacker backs off a little
					continue
				}
				for time.Now().Before(deadline) {
					_ = c.Conn.SetWriteDeadline(time.Now().Add(time.Second))
					if _, err := c.Conn.Write(pairAt()); err != nil {
						break // closed by herald: reconnect
					}
					pairs.Add(1)
					time.Sleep(10 * time.Millisecond) // pacing: 100 pairs a second a connection
				}
				c.Close()
			}
		}()
	}

	h := &honest{o: o, epoch: epoch, next: uint64(o.history) - 99}
	pubErr := make(chan error, 1)
	go func() { // the live events
		n, tick := o.history, time.NewTicker(time.Duration(float64(time.Second)/o.rate))
		defer tick.Stop()
		for time.Now().Before(deadline) {
			<-tick.C
			n++
			if err := publish(o, n, n, "live"); err != nil {
				pubErr <- err
				return
			}
			latest.Store(int64(n))
		}
		pubErr <- nil
		h.published.Store(int64(n))
	}()
	cpuA, _ := proc(o.pid)
	s := sample(o.pid)
	honestErr := h.run(deadline)
	wg.Wait()
	cpuB, _ := proc(o.pid)
	peak := s.end()
	if err := <-pubErr; err != nil {
		return err
	}
	after := metrics(o.metrics, "replay", "recoveries_total", "slow_consumer", "subscriptions_rate_limited")
	attackCPU := (cpuB - cpuA) / o.duration.Seconds()

	slices.Sort(h.lat)
	fmt.Printf("flood: %d connections from %s for %v, %d subscribe+recover pairs sent (%d connections opened, %d refused)\n",
		o.conns, o.from, o.duration, pairs.Load(), dials.Load(), dialErrs.Load())
	fmt.Printf("  history: %d events of %d bytes on %s (epoch %s)\n", o.history, o.size, o.channel, epoch)
	if o.pid != 0 {
		fmt.Printf("  server CPU: idle %.1f%% of a core, during the attack %.1f%% (%.1f%% above idle)\n",
			100*idleCPU, 100*attackCPU, 100*(attackCPU-idleCPU))
		fmt.Printf("  server RSS: idle %.1f MiB, peak during the attack %.1f MiB (%.2fx)\n", mib(rssIdle), mib(peak), float64(peak)/float64(rssIdle))
	}
	fmt.Printf("  honest client from %s: %d recoveries (%s), %d events in order (%d live), live latency P50 %v P99 %v max %v\n",
		o.honestFrom, h.recoveries, strings.Join(h.outcomes, " "), h.events, len(h.lat),
		pct(h.lat, 0.5).Round(time.Microsecond), pct(h.lat, 0.99).Round(time.Microsecond), pct(h.lat, 1).Round(time.Microsecond))
	if d := diff(before, after); d != "" {
		fmt.Printf("  metrics:\n%s", d)
	}
	return honestErr
}

// honest is a client that reads everything: it recovers from its position, reads the live
// events for 5 s, disconnects and does it again, checking that every offset comes once, in
// order.
type honest struct {
	o          options
	epoch      string
	next       uint64 // the offset it expects next
	recoveries int
	outcomes   []string
	events     int
	lat        []time.Duration
	published  atomic.Int64
}

func (h *honest) run(deadline time.Time) error {
	for time.Now().Before(deadline) {
		if err := h.cycle(min(time.Until(deadline), 5*time.Second)); err != nil {
			return err
		}
	}
	return nil
}

func (h *honest) cycle(d time.Duration) error {
	c, err := dial(h.o, h.o.honestFrom)
	if err != nil {
		return fmt.Errorf("honest client: %w", err)
	}
	defer c.Close()
	if _, err := c.Conn.Write(frame(subscribeMsg(h.o.channel, &herald.Position{Epoch: h.epoch, Offset: h.next - 1}))); err != nil {
		return err
	}
	h.recoveries++
	end, live := time.Now().Add(d), false
	var pos uint64
	for time.Now().Before(end) {
		m, err := c.Read(time.Until(end))
		if err != nil {
			if live && time.Now().After(end.Add(-10*time.Millisecond)) {
				return nil
			}
			var ne interface{ Timeout() bool }
			if errors.As(err, &ne) && ne.Timeout() && live {
				return nil
			}
			return fmt.Errorf("honest client, after offset %d: %w", h.next-1, err)
		}
		switch m.Event {
		case "pusher_internal:position":
			var p struct{ Offset uint64 }
			_ = json.Unmarshal([]byte(m.DataString()), &p)
			pos = p.Offset
		case "pusher_internal:recovery":
			var r struct {
				Recovered *bool
				Reason    string
				Offset    uint64
			}
			_ = json.Unmarshal([]byte(m.DataString()), &r)
			switch {
			case r.Recovered != nil && *r.Recovered:
				h.outcomes = append(h.outcomes, "ok")
			case r.Recovered != nil:
				h.outcomes = append(h.outcomes, r.Reason)
				h.next = r.Offset + 1 // it refetches; the live events go on from there
			}
			live = true
		case "bid":
			if pos != h.next {
				return fmt.Errorf("honest client: event at offset %d, want %d", pos, h.next)
			}
			h.next++
			h.events++
			if live {
				var ev struct{ T int64 }
				_ = json.Unmarshal([]byte(m.DataString()), &ev)
				h.lat = append(h.lat, time.Duration(time.Now().UnixNano()-ev.T))
			}
		default:
			if m.Close != 0 {
				return fmt.Errorf("honest client closed with %d after offset %d", m.Close, h.next-1)
			}
		}
	}
	return nil
}

package bench

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/herald-rt/herald/ws"
)

// pusher-js's activity check, which the clients of idle, fanout and multichannel keep as a
// browser does: a client that has received nothing for its activity timeout (pusher-js's
// activityTimeout option, 120 s by default, or the server's activity_timeout from
// connection_established when that is shorter) sends pusher:ping, and expects some message
// (the pong) within pongTimeout; pusher-js would then reconnect, the generator counts it.
// One sweep per pool stands for pusher-js's timer per connection.
const (
	// DefaultActivityTimeout is pusher-js's activityTimeout option's default.
	DefaultActivityTimeout = 120 * time.Second
	pongTimeout            = 30 * time.Second // pusher-js's pongTimeout default
	pingSweepEvery         = time.Second      // at most; a tenth of a shorter timeout
)

var pingMessage = []byte(`{"event":"pusher:ping","data":{}}`)

// PingCounts are what a run's clients did about idle connections.
type PingCounts struct {
	// Sent counts pusher:ping messages the clients sent after their activity timeout.
	Sent int64 `json:"sent"`
	// Answered counts the server's pusher:ping messages the clients answered with pusher:pong.
	Answered int64 `json:"answered"`
	// Unanswered counts client pings nothing answered within pusher-js's pong timeout (30 s).
	Unanswered int64 `json:"unanswered"`
}

func (c *PingCounts) add(o PingCounts) {
	c.Sent += o.Sent
	c.Answered += o.Answered
	c.Unanswered += o.Unanswered
}

func (c PingCounts) minus(o PingCounts) PingCounts {
	return PingCounts{Sent: c.Sent - o.Sent, Answered: c.Answered - o.Answered, Unanswered: c.Unanswered - o.Unanswered}
}

// activityTimeoutOf reads activity_timeout (seconds) from connection_established's data, a
// JSON string holding an object; 0 when it is not there.
func activityTimeoutOf(data json.RawMessage) int64 {
	var inner string
	if json.Unmarshal(data, &inner) == nil {
		data = json.RawMessage(inner)
	}
	var hello struct {
		ActivityTimeout float64 `json:"activity_timeout"`
	}
	if json.Unmarshal(data, &hello) != nil || hello.ActivityTimeout <= 0 {
		return 0
	}
	return int64(hello.ActivityTimeout * float64(time.Second))
}

// pinger is a pool's activity check: the sweep goroutine and its counts.
type pinger struct {
	mu       sync.Mutex
	activity time.Duration // the clients' own timeout; negative: they never ping first
	respread bool          // the timeout became shorter: the sweep spreads the next pings
	sent     int64
	missed   int64
	wake     chan struct{} // setActivity asks for a sweep now
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
}

// startPings starts p's activity check with the clients' own activity timeout (0: pusher-js's
// default; negative: clients never ping first, they only answer the server's pings).
func (p *pool) startPings(activity time.Duration) {
	if activity == 0 {
		activity = DefaultActivityTimeout
	}
	p.ping = &pinger{activity: activity, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go p.sweepPings()
}

// setActivity changes the clients' own activity timeout (0: leave it) and returns the
// counts so far.
func (p *pool) setActivity(activity time.Duration) PingCounts {
	c := PingCounts{Answered: p.rec.pings.Load()}
	if p.ping == nil {
		return c
	}
	p.ping.mu.Lock()
	if activity > 0 && (p.ping.activity < 0 || activity < p.ping.activity) {
		p.ping.respread = true
	}
	if activity != 0 {
		p.ping.activity = activity
	}
	c.Sent, c.Unanswered = p.ping.sent, p.ping.missed
	p.ping.mu.Unlock()
	select { // the sweep's timer may be a whole second of the old timeout away
	case p.ping.wake <- struct{}{}:
	default:
	}
	return c
}

// spread makes the clients' next pings, under a shorter activity timeout, fall evenly over
// its first period, as they would for clients that connected at random times; without it
// every client that has been quiet longer than the new timeout would ping in the same sweep,
// and again together one period later. It runs on the sweep, which owns pingAt: a ping
// already answered is settled first, or moving its client's last receipt back before it
// would make it look unanswered, and that client would not ping again until its pong
// timeout.
func spread(clients []*client, activity time.Duration, now int64) {
	for k, c := range clients {
		if c.pingAt != 0 && c.lastRx.Load() >= c.pingAt {
			c.pingAt = 0
		}
		c.lastRx.Store(now - int64(activity)*int64(k*7919%1000)/1000)
	}
}

// stopPings stops the sweep and waits for it; the pool is closing.
func (p *pool) stopPings() {
	if p.ping != nil {
		p.ping.once.Do(func() { close(p.ping.stop) })
		<-p.ping.done
	}
}

func (p *pool) sweepPings() {
	defer close(p.ping.done)
	t := time.NewTimer(pingSweepEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-p.ping.wake: // t.Reset below discards a tick that fired meanwhile (Go 1.23 timers)
		case <-p.ping.stop:
			return
		}
		p.mu.Lock()
		clients := p.clients // append-only: the elements below len stay
		p.mu.Unlock()
		p.ping.mu.Lock()
		own, respread := p.ping.activity, p.ping.respread
		p.ping.respread = false
		p.ping.mu.Unlock()
		if respread && own > 0 {
			spread(clients, own, time.Now().UnixNano())
		}
		// A tenth of the timeout, within [100 ms, 1 s]: pings at most 10% late.
		if own < 0 {
			t.Reset(pingSweepEvery)
			continue
		}
		t.Reset(min(max(own/10, pingSweepEvery/10), pingSweepEvery))
		now := time.Now().UnixNano()
		var sent, missed int64
		for _, c := range clients {
			last := c.lastRx.Load()
			if c.pingAt != 0 {
				if last >= c.pingAt {
					c.pingAt = 0
				} else if now-c.pingAt >= int64(pongTimeout) {
					missed++
					c.pingAt = 0
				}
			}
			timeout := int64(own)
			if a := c.activity.Load(); a > 0 {
				timeout = min(timeout, a)
			}
			if c.pingAt == 0 && now-last >= timeout {
				c.pingAt = now
				c.send(ws.OpText, pingMessage)
				sent++
			}
		}
		p.ping.mu.Lock()
		p.ping.sent += sent
		p.ping.missed += missed
		p.ping.mu.Unlock()
	}
}

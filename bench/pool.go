package bench

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald/ws"
)

// pool is the set of subscribed clients of one run and the engine that reads them: one
// epoll poller per core, whatever the number of connections.
type pool struct {
	eng  *ws.Engine
	rec  *recorder
	tl   *Timeline
	ping *pinger   // the clients' activity check (ping.go); nil: they only answer the server's pings
	re   *redialer // brings back the clients the server closed (reconnect.go); nil: they stay closed

	attempts    atomic.Int64
	failed      atomic.Int64
	established atomic.Int64 // attached
	active      atomic.Int64 // attached and not hung up
	alive       sync.WaitGroup

	mu      sync.Mutex
	clients []*client
	lost    Lost
	lostErr error
}

// Lost counts connections that the server (or the network) ended before the generator closed
// them, with the first one's reason and the count per close code (0: no close frame).
type Lost struct {
	Count      int         `json:"count"`
	FirstError string      `json:"first_error,omitempty"`
	ByCode     map[int]int `json:"by_code,omitempty"`
	// Seen is what the first few lost clients had seen when they ended (at most maxLostSeen):
	// enough to tell a server that stopped writing from a client that stopped answering.
	Seen []LostConn `json:"seen,omitempty"`
}

// maxLostSeen bounds Lost.Seen.
const maxLostSeen = 20

// LostConn is one lost client's last moments: when it ended, and ages in milliseconds before then.
type LostConn struct {
	Code    int   `json:"code"`        // the server's close code; 0: no close frame
	EndMs   int64 `json:"end_unix_ms"` // when the close frame arrived, or the hang-up without one
	RxAgo   int64 `json:"rx_ago_ms"`   // since it last received a message
	PingAgo int64 `json:"ping_ago_ms"` // since the server's last pusher:ping reached it; -1: none did
	TxAgo   int64 `json:"tx_ago_ms"`   // since it last wrote a frame; -1: none since attached
	Unsent  int   `json:"unsent"`      // bytes it had written that the kernel had not taken
}

func (l *Lost) merge(o Lost) {
	l.Count += o.Count
	if l.FirstError == "" {
		l.FirstError = o.FirstError
	}
	for code, n := range o.ByCode {
		if l.ByCode == nil {
			l.ByCode = map[int]int{}
		}
		l.ByCode[code] += n
	}
	l.Seen = append(l.Seen, o.Seen[:min(len(o.Seen), maxLostSeen-len(l.Seen))]...)
}

func newPool(rec *recorder, tl *Timeline) (*pool, error) {
	p := &pool{rec: rec, tl: tl}
	eng, err := ws.NewEngine(ws.Config{Client: true, Pollers: runtime.GOMAXPROCS(0), MaxMessageBytes: maxMessageBytes}, p)
	if err != nil {
		return nil, fmt.Errorf("start the client engine: %w", err)
	}
	p.eng = eng
	return p, nil
}

// attach hands a set-up client's socket to the engine; pre holds bytes already read past the
// handshake. On error the socket is closed and the client is not counted.
func (p *pool) attach(c *client, nc net.Conn, pre []byte) error {
	p.alive.Add(1)
	bound := false
	_, err := p.eng.Attach(nc, pre, func(conn *ws.Conn) {
		bound = true
		conn.Data = c
		c.mu.Lock() // a reconnected client is in p.clients already, where the sweep reads it
		c.conn, c.gone = conn, false
		c.mu.Unlock()
		c.lastRx.Store(time.Now().UnixNano())
		p.established.Add(1)
		p.active.Add(1)
		if p.tl != nil {
			p.tl.Connected(1)
		}
		if !c.attached {
			c.attached = true
			p.mu.Lock()
			p.clients = append(p.clients, c)
			p.mu.Unlock()
		}
	})
	if !bound {
		p.alive.Done()
	}
	if err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	return nil
}

// OnMessage, OnProtocolError, OnWritable and OnHangup make the pool the engine's handler.
func (p *pool) OnMessage(conn *ws.Conn, op ws.Opcode, payload []byte) {
	c := conn.Data.(*client)
	if op == ws.OpClose {
		p.note(closedErrorOf(payload))
	}
	c.onMessage(op, payload)
}

func (p *pool) OnProtocolError(conn *ws.Conn, code int, reason string) {
	p.note(fmt.Errorf("server broke the WebSocket protocol: %s", reason))
	c := conn.Data.(*client)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending = ws.AppendClientFrame(c.pending, ws.OpClose, []byte{byte(code >> 8), byte(code)})
	c.flushLocked()
	conn.Shutdown()
}

func (p *pool) OnWritable(conn *ws.Conn) {
	c := conn.Data.(*client)
	c.mu.Lock()
	c.flushLocked()
	c.mu.Unlock()
}

func (p *pool) OnHangup(conn *ws.Conn) {
	c := conn.Data.(*client)
	c.mu.Lock()
	c.gone = true
	lost, code := !c.closing, int(c.code)
	var seen LostConn
	switch {
	case lost && c.closed != nil:
		seen = *c.closed
	case lost:
		seen = c.lastMoments(code, len(c.pending))
	}
	c.pending = nil
	conn.Close()
	c.mu.Unlock()
	if lost {
		p.note(errors.New("server closed the connection without a close frame"))
		p.mu.Lock()
		p.lost.Count++
		if p.lost.ByCode == nil {
			p.lost.ByCode = map[int]int{}
		}
		p.lost.ByCode[code]++
		if len(p.lost.Seen) < maxLostSeen {
			p.lost.Seen = append(p.lost.Seen, seen)
		}
		p.mu.Unlock()
	}
	p.active.Add(-1)
	if p.tl != nil {
		p.tl.Connected(-1)
	}
	if lost && p.re != nil {
		p.re.hungUp(c, code)
	}
	p.alive.Done()
}

// note keeps the first reason a connection ended.
func (p *pool) note(err error) {
	p.mu.Lock()
	if p.lostErr == nil {
		p.lostErr = err
	}
	p.mu.Unlock()
}

// lostSoFar returns the connections lost so far.
func (p *pool) lostSoFar() Lost {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.lost
	l.ByCode = nil
	for code, n := range p.lost.ByCode {
		if l.ByCode == nil {
			l.ByCode = map[int]int{}
		}
		l.ByCode[code] = n
	}
	l.Seen = slices.Clone(p.lost.Seen)
	if l.Count > 0 && p.lostErr != nil {
		l.FirstError = p.lostErr.Error()
	}
	return l
}

// close closes every client cleanly and waits, at most d, for their hang-ups; then it stops
// the engine. After it returns nil, every client's tracks may be read.
func (p *pool) close(d time.Duration) error {
	if p == nil {
		return nil
	}
	p.stopPings()
	if p.re != nil {
		p.re.stop()
	}
	p.mu.Lock()
	clients := p.clients
	p.mu.Unlock()
	for _, c := range clients {
		c.close()
	}
	done := make(chan struct{})
	go func() { p.alive.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		// The engine stops anyway; those connections' descriptors stay open.
		p.eng.Close()
		return fmt.Errorf("close: %d connections still open after %v", p.active.Load(), d)
	}
	return p.eng.Close()
}

// activeOn counts the clients still open on each of n nodes.
func (p *pool) activeOn(n int) []int {
	counts := make([]int, n)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.clients {
		c.mu.Lock()
		if !c.gone && int(c.node) < n {
			counts[c.node]++
		}
		c.mu.Unlock()
	}
	return counts
}

// delivery counts every client's tracks; to and failed give each channel's last published
// seq and the seqs whose publish failed (nil: none). The pool must be closed.
func (p *pool) delivery(to func(ch int) int32, failed func(ch int) []int32) Delivery {
	var d Delivery
	for _, c := range p.clients {
		for i := range c.tracks {
			ch := int(c.chans[i])
			var f []int32
			if failed != nil {
				f = failed(ch)
			}
			d.add(&c.tracks[i], to(ch), f)
		}
	}
	d.finish()
	return d
}

// expectedSince counts the first receipts that complete the run: every open subscription of
// p expects each seq up to last published after it succeeded, but for the failed publishes;
// a subscription the server ended counts what it had received.
func expectedSince(p *pool, last int32, failed []int32) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for _, c := range p.clients {
		c.mu.Lock()
		gone := c.gone
		c.mu.Unlock()
		if gone { // the hang-up happened before: its tracks are final
			for i := range c.tracks {
				n += c.tracks[i].count(c.tracks[i].from, 1<<30)
			}
			continue
		}
		for i := range c.tracks {
			from := c.tracks[i].from
			n += int64(max(last-from, 0))
			for _, f := range failed {
				if f > from && f <= last {
					n--
				}
			}
		}
	}
	return n
}

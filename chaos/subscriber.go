//go:build linux

package chaos

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald/internal/wstest"
)

// The subscribers' timings, those of pusher-js with herald's recovery helper
// (clients/js/README.md): a ping after the server's activity_timeout of silence (the nodes
// are given activityTimeout), a new connection when no pong comes within pongTimeout; the
// first attempt after a drop 250 to 500 ms later, then a tenth of the time the connection has
// been down (0.5 to 5 s, jittered down by up to half); an attempt not connected within
// attemptTimeout is given up; after a close with a code from 4100 to 4199 a second more.
const (
	activityTimeout = 10 * time.Second
	pongTimeout     = 5 * time.Second
	attemptTimeout  = 10 * time.Second
	reconnectFirst  = 500 * time.Millisecond
	reconnectMost   = 5 * time.Second
	reconnectRatio  = 0.1
	backoffExtra    = time.Second
	writeTimeout    = 5 * time.Second
)

// subscriber is one client subscribed to every channel of the run, over one connection at a
// time, that follows each channel's position and recovers from it when it subscribes again,
// as pusher-js with herald's recovery helper does. It records everything it sees.
type subscriber struct {
	id       int
	channels []string
	nodes    []*node
	key      string // the app's key
	start    time.Time
	rng      *rand.Rand // its run goroutine's only

	mu        sync.Mutex
	entries   []Entry
	positions map[string]Position         // channel -> the position of the last event handled
	delivered map[string]map[string]int   // channel -> publisher -> highest number handed on
	handled   map[string]map[int64]string // channel -> offset -> the event handled there, in the position's epoch
	conn      net.Conn                    // the connection now, nil between two
	up        bool                        // every channel's subscription answered on the connection now
}

func newSubscriber(id int, channels []string, nodes []*node, key string, start time.Time, seed uint64) *subscriber {
	return &subscriber{id: id, channels: channels, nodes: nodes, key: key, start: start,
		rng:       rand.New(rand.NewPCG(seed, uint64(id)+1<<32)),
		positions: map[string]Position{}, delivered: map[string]map[string]int{}, handled: map[string]map[int64]string{}}
}

// run connects, and connects again after every drop, until ctx ends.
func (s *subscriber) run(ctx context.Context) {
	next := s.id % len(s.nodes)
	var down time.Time // when the last connection dropped
	for ctx.Err() == nil {
		established, code := s.session(ctx, s.nodes[next])
		next = (next + 1) % len(s.nodes) // the next attempt goes to the next node
		if established {
			down = time.Now()
		}
		wait := s.delay(time.Since(down))
		if code >= 4100 && code < 4200 {
			wait += backoffExtra
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// delay is the helper's: ratio times the time the connection has been down, from first to
// most, jittered down by up to half.
func (s *subscriber) delay(down time.Duration) time.Duration {
	d := min(reconnectMost, max(reconnectFirst, time.Duration(float64(down)*reconnectRatio)))
	return time.Duration(float64(d) * (0.5 + s.rng.Float64()/2))
}

// cut closes the connection abruptly (a reset), as a lost client link would end it; it
// reports whether there was one.
func (s *subscriber) cut() bool {
	s.mu.Lock()
	c := s.conn
	s.mu.Unlock()
	if c == nil {
		return false
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
	return true
}

// stop ends the connection now (run's ctx must be ended too).
func (s *subscriber) stop() { s.cut() }

// session is one connection to n: it subscribes to every channel, recovering each whose
// position it has, and records what comes until the connection ends. established reports
// whether herald's pusher:connection_established came; code is the close frame's code.
func (s *subscriber) session(ctx context.Context, n *node) (established bool, code int) {
	d := net.Dialer{Timeout: attemptTimeout}
	nc, err := d.DialContext(ctx, "tcp", n.addr)
	if err != nil {
		return false, 0
	}
	// Until herald says the connection is established, the attempt is given up after
	// attemptTimeout (a stopped node accepts connections it never answers).
	giveUp := time.AfterFunc(attemptTimeout, func() { nc.Close() })
	defer giveUp.Stop()
	stopOnCancel := context.AfterFunc(ctx, func() { nc.Close() })
	defer stopOnCancel()
	s.mu.Lock()
	s.conn = nc
	s.mu.Unlock()
	defer func() {
		nc.Close()
		s.mu.Lock()
		s.conn, s.up = nil, false
		s.mu.Unlock()
		if established {
			s.record(Entry{Kind: Closed, Node: n.i, Code: code})
		}
	}()
	c, err := wstest.HandshakeWith(nc, n.addr, "/app/"+s.key+"?protocol=7&client=herald-chaos&version=1", nil)
	if err != nil {
		return false, 0
	}
	var wmu sync.Mutex
	send := func(op byte, b []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		_ = nc.SetWriteDeadline(time.Now().Add(writeTimeout))
		return c.WriteFrame(true, op, b)
	}
	var last atomic.Int64 // when the last frame came, Unix ns
	last.Store(time.Now().UnixNano())
	pinger := make(chan struct{})
	defer close(pinger)
	go ping(pinger, &last, send)

	pending := map[string]Position{} // channel -> the position announced for the next event
	asked := map[string]bool{}       // channel -> this subscription asked to recover
	answered := map[string]bool{}    // channel -> its subscription was answered (recovery frame)
	for {
		f, err := c.ReadFrame(activityTimeout + pongTimeout)
		if err != nil {
			return established, code
		}
		last.Store(time.Now().UnixNano())
		switch f.Op {
		case 0x8:
			return established, f.CloseCode()
		case 0x9:
			_ = send(0xA, f.Payload)
			continue
		case 0x1:
		default:
			continue
		}
		var m wstest.Message
		if json.Unmarshal(f.Payload, &m) != nil {
			continue
		}
		switch m.Event {
		case "pusher:connection_established":
			giveUp.Stop()
			established = true
			s.record(Entry{Kind: Connected, Node: n.i})
			if err := s.subscribe(send, asked); err != nil {
				return established, 0
			}
		case "pusher:ping":
			_ = send(0x1, []byte(`{"event":"pusher:pong","data":{}}`))
		case "pusher:error", "pusher:subscription_error":
			s.record(Entry{Kind: Refused, Node: n.i, Channel: m.Channel, Reason: m.Event + " " + m.DataString()})
		case "pusher_internal:subscription_succeeded":
			s.record(Entry{Kind: Subscribed, Node: n.i, Channel: m.Channel})
		case "pusher_internal:position":
			var p Position
			if json.Unmarshal([]byte(m.DataString()), &p) == nil {
				pending[m.Channel] = p
			}
		case "pusher_internal:recovery":
			delete(pending, m.Channel)
			s.recovered(n.i, m, asked[m.Channel])
			answered[m.Channel] = true
			if len(answered) == len(s.channels) {
				s.mu.Lock()
				s.up = true
				s.mu.Unlock()
			}
		case "chaos":
			var p payload
			_ = json.Unmarshal([]byte(m.DataString()), &p)
			var pos *Position
			if q, ok := pending[m.Channel]; ok {
				pos = &q
				delete(pending, m.Channel)
			}
			s.received(n.i, m.Channel, p, pos)
		}
	}
}

// ping sends pusher:ping after activityTimeout without a frame, as pusher-js does, until
// stop is closed.
func ping(stop <-chan struct{}, last *atomic.Int64, send func(byte, []byte) error) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var sent int64 // the last frame's time when the ping was sent
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		l := last.Load()
		if time.Since(time.Unix(0, l)) >= activityTimeout && sent != l {
			sent = l
			_ = send(0x1, []byte(`{"event":"pusher:ping","data":{}}`))
		}
	}
}

// subscribe sends a pusher:subscribe for every channel, with recover from its position when
// it has one, and notes which asked.
func (s *subscriber) subscribe(send func(byte, []byte) error, asked map[string]bool) error {
	s.mu.Lock()
	msgs := make([][]byte, 0, len(s.channels))
	for _, ch := range s.channels {
		data := map[string]any{"channel": ch}
		if p, ok := s.positions[ch]; ok {
			data["recover"] = p
			asked[ch] = true
		}
		b, _ := json.Marshal(map[string]any{"event": "pusher:subscribe", "data": data})
		msgs = append(msgs, b)
	}
	s.mu.Unlock()
	for _, b := range msgs {
		if err := send(0x1, b); err != nil {
			return err
		}
	}
	return nil
}

// recovered records a pusher_internal:recovery and takes the position it gives.
func (s *subscriber) recovered(node int, m wstest.Message, asked bool) {
	var r struct {
		Epoch     *string `json:"epoch"`
		Offset    int64   `json:"offset"`
		Recovered *bool   `json:"recovered"`
		Reason    string  `json:"reason"`
	}
	_ = json.Unmarshal([]byte(m.DataString()), &r)
	e := Entry{Kind: Recovery, Node: node, Channel: m.Channel, Asked: asked, Reason: r.Reason}
	if r.Recovered != nil {
		e.Recovered = *r.Recovered
	}
	s.mu.Lock()
	switch {
	case r.Reason == "no_history":
		delete(s.positions, m.Channel)
	case r.Epoch != nil:
		if s.positions[m.Channel].Epoch != *r.Epoch {
			delete(s.handled, m.Channel) // another epoch: its offsets are new
		}
		s.positions[m.Channel] = Position{Epoch: *r.Epoch, Offset: r.Offset}
		e.Pos = &Position{Epoch: *r.Epoch, Offset: r.Offset}
	}
	s.mu.Unlock()
	s.record(e)
}

// received records an event and, unless it replays one the subscriber has handled, takes
// its position.
func (s *subscriber) received(node int, channel string, p payload, pos *Position) {
	e := Entry{Kind: Received, Node: node, Channel: channel, Publisher: p.P, Seq: p.S, Pos: pos}
	s.mu.Lock()
	if pos != nil {
		id := p.P + "-" + strconv.Itoa(p.S)
		last, ok := s.positions[channel]
		switch {
		case ok && last.Epoch == pos.Epoch && pos.Offset <= last.Offset:
			e.Dropped = true
			if was, ok := s.handled[channel][pos.Offset]; ok && was != id {
				e.Was = was
			}
		default:
			if !ok || last.Epoch != pos.Epoch || s.handled[channel] == nil {
				s.handled[channel] = map[int64]string{}
			}
			s.handled[channel][pos.Offset] = id
			s.positions[channel] = *pos
		}
	}
	if !e.Dropped {
		byPub := s.delivered[channel]
		if byPub == nil {
			byPub = map[string]int{}
			s.delivered[channel] = byPub
		}
		if p.S > byPub[p.P] {
			byPub[p.P] = p.S
		}
	}
	s.mu.Unlock()
	s.record(e)
}

func (s *subscriber) record(e Entry) {
	e.At = time.Since(s.start)
	s.mu.Lock()
	s.entries = append(s.entries, e)
	s.mu.Unlock()
}

// highest is the highest number of publisher's events on channel handed on.
func (s *subscriber) highest(channel, publisher string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.delivered[channel][publisher]
}

// subscribed reports whether the subscriber is subscribed to every channel on a connection
// now (herald answered each subscription).
func (s *subscriber) subscribed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.up
}

// log returns what the subscriber recorded.
func (s *subscriber) log() []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Entry(nil), s.entries...)
}

package bench

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald/ws"
)

// maxMessageBytes bounds one message from the server.
const maxMessageBytes = 16 << 20

// setupReadBuffer is the read buffer of a connection being set up; it is returned to a pool
// once the socket is attached, so an open client holds no buffer.
const setupReadBuffer = 2048

var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, setupReadBuffer) }}

// aLongTimeAgo is a deadline that unblocks any pending read or write at once.
var aLongTimeAgo = time.Unix(1, 0)

// client is one subscribed WebSocket connection. It is set up on a connect goroutine with
// blocking reads, then attached to its pool's engine: from then on the engine's poller reads
// it and no goroutine is its own.
type client struct {
	rec    *recorder // what it records into; it also names the run's channels
	conn   *ws.Conn  // set when attached
	chans  []int32   // the run's channel index of each track; shared between clients
	tracks []track
	shard  int32        // latency shard
	node   int32        // the node it connected to, in --ws order
	pings  atomic.Int32 // pusher:ping messages answered
	index  int32        // its index in the run (presence: which member it is)

	// What pusher-js's activity check needs (ping.go): when the client last received a
	// message (unix ns), the server's activity_timeout (ns; 0: not said) and when the sweep
	// sent its pusher:ping, unanswered so far (0: none; only the sweep touches it).
	lastRx   atomic.Int64
	activity atomic.Int64 // set again by a reconnect, while the sweep reads it
	pingAt   int64
	pingRx   atomic.Int64 // when the server's last pusher:ping arrived (unix ns; 0: none)
	pos      *follow      // its position in a history channel, when it reconnects (reconnect.go)
	attached bool         // in its pool's clients: a reconnect attaches it again

	mu      sync.Mutex // guards what follows and every write to conn
	pending []byte     // frames the kernel has not taken yet
	code    int32      // close code the server sent (0: none yet)
	closing bool       // the generator is closing it
	gone    bool       // hung up: conn is closed
	lastTx  int64      // when it last wrote a frame (unix ns; 0: not since attached)
	closed  *LostConn  // what it had seen when the server's close frame arrived
}

// closedError is a close frame from the server.
type closedError struct {
	code   int
	reason string
}

func (e *closedError) Error() string {
	if e.reason == "" {
		return fmt.Sprintf("server closed the connection with code %d", e.code)
	}
	return fmt.Sprintf("server closed the connection with code %d (%s)", e.code, e.reason)
}

func closedErrorOf(p []byte) *closedError {
	e := &closedError{code: 1005}
	if len(p) >= 2 {
		e.code, e.reason = int(binary.BigEndian.Uint16(p)), string(p[2:])
	}
	return e
}

// setup does the Pusher handshake on nc: the WebSocket upgrade, connection_established, one
// subscribe per channel and their subscription_succeeded, recording any event that arrives on
// the way. It returns the bytes read past the last of them.
func (c *client) setup(nc net.Conn, ep endpoint) ([]byte, error) {
	return converse(nc, ep, func(m *ws.MessageReader) error {
		_, hello, err := c.await(nc, m, "pusher:connection_established")
		if err != nil {
			return err
		}
		c.activity.Store(activityTimeoutOf(hello))
		var subs []byte
		for i, ch := range c.chans {
			data := map[string]any{"channel": c.rec.channels[ch]}
			if c.rec.recoverFrom != nil {
				if p := c.rec.recoverFrom(c, i); p != nil {
					data["recover"] = p
				}
			}
			msg, _ := json.Marshal(map[string]any{"event": "pusher:subscribe", "data": data})
			subs = ws.AppendClientFrame(subs, ws.OpText, msg)
		}
		if _, err := nc.Write(subs); err != nil {
			return fmt.Errorf("subscribe: %w", err)
		}
		for left := len(c.chans); left > 0; left-- {
			name, _, err := c.await(nc, m, "pusher_internal:subscription_succeeded")
			if err != nil {
				return err
			}
			i := c.trackOf([]byte(name))
			if i < 0 {
				return fmt.Errorf("server confirmed a subscription to %q, which was not asked for", name)
			}
			if c.rec.started != nil {
				c.tracks[i].from = c.rec.started(int(c.chans[i]))
			}
		}
		return nil
	})
}

// converse upgrades nc to a WebSocket connection to ep and runs talk over its messages,
// reading through a pooled buffer; it returns the bytes read past talk's last message.
func converse(nc net.Conn, ep endpoint, talk func(m *ws.MessageReader) error) ([]byte, error) {
	br := readers.Get().(*bufio.Reader)
	br.Reset(nc)
	defer func() { br.Reset(nil); readers.Put(br) }()
	if err := ws.ClientHandshake(nc, br, ep.host, ep.path); err != nil {
		return nil, fmt.Errorf("websocket handshake: %w", err)
	}
	if err := talk(&ws.MessageReader{R: br, Max: maxMessageBytes}); err != nil {
		return nil, err
	}
	var pre []byte
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		pre = bytes.Clone(b)
	}
	return pre, nil
}

// await reads messages until event arrives and returns its channel and data, answering pings
// and recording events on the way (others go to the recorder's other hook, when set), and
// failing on a Pusher error, a subscription error or a close.
func (c *client) await(nc net.Conn, m *ws.MessageReader, event string) (string, json.RawMessage, error) {
	for {
		op, p, err := m.Next()
		if err != nil {
			return "", nil, fmt.Errorf("waiting for %s: %w", event, err)
		}
		switch op {
		case ws.OpClose:
			return "", nil, fmt.Errorf("waiting for %s: %w", event, closedErrorOf(p))
		case ws.OpPing:
			if _, err := nc.Write(ws.AppendClientFrame(nil, ws.OpPong, p)); err != nil {
				return "", nil, err
			}
			continue
		case ws.OpText, ws.OpBinary:
		default:
			continue
		}
		if c.event(p, time.Now().UnixNano()) {
			continue
		}
		var msg struct {
			Event   string          `json:"event"`
			Channel string          `json:"channel"`
			Data    json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(p, &msg); err != nil {
			return "", nil, fmt.Errorf("waiting for %s: server sent invalid JSON %.200q", event, p)
		}
		switch msg.Event {
		case event:
			return msg.Channel, msg.Data, nil
		case "pusher:error", "pusher:subscription_error":
			return "", nil, fmt.Errorf("waiting for %s: server sent %s %s", event, msg.Event, msg.Data)
		case "pusher:ping":
			if _, err := nc.Write(ws.AppendClientFrame(nil, ws.OpText, pongMessage)); err != nil {
				return "", nil, err
			}
		default:
			if c.rec.other != nil {
				c.rec.other(c, p)
			}
		}
	}
}

var pongMessage = []byte(`{"event":"pusher:pong","data":{}}`)

// event records p when it is a bench event and reports whether it was one.
func (c *client) event(p []byte, now int64) bool {
	seq, sent, sched, channel, ok := parseBench(p)
	if !ok {
		return false
	}
	c.rec.frames.Add(1)
	i := c.trackOf(channel)
	if i < 0 {
		return true // not a channel it joined: ignored, as no expectation covers it
	}
	first := c.tracks[i].add(seq, c.rec.maxSeq)
	if c.rec.seen != nil {
		c.rec.seen(c, i, seq, first)
	}
	if first {
		c.rec.hit(int(c.shard), seq, now-sent, now-sched, now)
	}
	return true
}

// trackOf returns the index of the track of the named channel, or -1.
func (c *client) trackOf(name []byte) int {
	for i, ch := range c.chans {
		if string(name) == c.rec.channels[ch] {
			return i
		}
	}
	return -1
}

// onMessage handles one message once the client is attached; it runs on the poller.
func (c *client) onMessage(op ws.Opcode, p []byte) {
	now := time.Now().UnixNano()
	c.lastRx.Store(now)
	switch op {
	case ws.OpText, ws.OpBinary:
		if c.event(p, now) {
			return
		}
		if isPusherPing(p) {
			c.pingRx.Store(now)
			c.rec.pings.Add(1)
			c.pings.Add(1)
			c.send(ws.OpText, pongMessage)
		} else if c.rec.other != nil {
			c.rec.other(c, p)
		}
	case ws.OpPing:
		c.send(ws.OpPong, p)
	case ws.OpClose:
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.closing || c.gone {
			return // the server's answer to our close
		}
		c.code = int32(closedErrorOf(p).code)
		seen := c.lastMoments(int(c.code), len(c.pending))
		c.closed = &seen
		c.pending = ws.AppendClientFrame(c.pending, ws.OpClose, p[:min(len(p), 2)])
		c.flushLocked()
		c.conn.Shutdown()
	}
}

// send writes one frame, keeping what the kernel does not take until the socket drains.
func (c *client) send(op ws.Opcode, payload []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gone {
		return
	}
	c.pending = ws.AppendClientFrame(c.pending, op, payload)
	c.flushLocked()
}

// flushLocked writes pending; c.mu must be held.
func (c *client) flushLocked() {
	if len(c.pending) == 0 || c.gone {
		return
	}
	n, _, err := c.conn.Writev([][]byte{c.pending})
	if n > 0 {
		c.lastTx = time.Now().UnixNano()
	}
	if err != nil {
		c.pending = nil
		c.conn.Shutdown()
		return
	}
	if c.pending = c.pending[n:]; len(c.pending) == 0 {
		c.pending = nil
	}
}

// close starts a clean close: a close frame with status 1000, then the socket's shutdown. The
// engine reports the hang-up that follows. Safe to call more than once and after a hang-up.
func (c *client) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing || c.gone {
		c.closing = true
		return
	}
	c.closing = true
	c.pending = ws.AppendClientFrame(c.pending, ws.OpClose, []byte{0x03, 0xE8})
	c.flushLocked()
	c.conn.Shutdown()
}

// lastMoments is what c had seen when it ended with code (c.mu held): ages in ms.
func (c *client) lastMoments(code, unsent int) LostConn {
	now := time.Now().UnixNano()
	ago := func(t int64) int64 {
		if t == 0 {
			return -1
		}
		return (now - t) / int64(time.Millisecond)
	}
	return LostConn{Code: code, EndMs: now / int64(time.Millisecond), RxAgo: ago(c.lastRx.Load()),
		PingAgo: ago(c.pingRx.Load()), TxAgo: ago(c.lastTx), Unsent: unsent}
}

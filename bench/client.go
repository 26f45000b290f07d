package bench

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

// WebSocket opcodes (RFC 6455 §5.2).
const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xA
)

// readBufferSize is each client's read buffer: a fan-out frame of the default payload is about
// 200 bytes, and a small buffer keeps 19,000 idle clients cheap; larger frames are read
// straight into the payload buffer.
const readBufferSize = 1024

// maxMessageBytes bounds one message from the server.
const maxMessageBytes = 16 << 20

// aLongTimeAgo is a deadline that unblocks any pending read or write at once.
var aLongTimeAgo = time.Unix(1, 0)

// client is one subscribed WebSocket connection. Its run goroutine is the only reader and, but
// for close, the only writer.
type client struct {
	nc  net.Conn
	br  *bufio.Reader
	buf []byte // the current message; reused

	wmu  sync.Mutex // serialises writes: run's pong replies and close
	done chan struct{}

	// Written by run only; read by others after done is closed.
	samples []sample
	err     error // why run stopped
	lost    bool  // run stopped before close was called: the server or the network ended it

	closing bool // guarded by wmu: close has been called
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

// dialClient connects to ep, waits for pusher:connection_established, subscribes to channel and
// waits for pusher_internal:subscription_succeeded, all before deadline or ctx's end. i numbers
// the client within its run.
func dialClient(ctx context.Context, ep endpoint, i int, channel string, deadline time.Time) (*client, error) {
	nc, err := ep.dialer(i, deadline).DialContext(ctx, "tcp", ep.addr)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	_ = nc.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(aLongTimeAgo) })
	c := &client{nc: nc, br: bufio.NewReaderSize(nc, readBufferSize), done: make(chan struct{})}
	err = c.setup(ep, channel)
	if !stop() && err == nil {
		err = ctx.Err()
	}
	if err != nil {
		nc.Close()
		if cause := context.Cause(ctx); cause != nil {
			err = fmt.Errorf("%w (%v)", err, cause)
		}
		return nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	return c, nil
}

func (c *client) setup(ep endpoint, channel string) error {
	if err := c.handshake(ep); err != nil {
		return fmt.Errorf("websocket handshake: %w", err)
	}
	if err := c.await("pusher:connection_established", ""); err != nil {
		return err
	}
	sub, _ := json.Marshal(map[string]any{"event": "pusher:subscribe", "data": map[string]string{"channel": channel}})
	if err := c.write(opText, sub); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	return c.await("pusher_internal:subscription_succeeded", channel)
}

func (c *client) handshake(ep endpoint) error {
	var k [16]byte
	_, _ = rand.Read(k[:])
	req := "GET " + ep.path + " HTTP/1.1\r\nHost: " + ep.host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: " + base64.StdEncoding.EncodeToString(k[:]) + "\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := io.WriteString(c.nc, req); err != nil {
		return err
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return fmt.Errorf("server answered %s: %q", resp.Status, body)
	}
	return nil
}

// await reads messages until event arrives (for channel, when channel is set), failing on a
// Pusher error, a subscription error or a close.
func (c *client) await(event, channel string) error {
	for {
		p, err := c.next()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", event, err)
		}
		var m struct {
			Event   string          `json:"event"`
			Channel string          `json:"channel"`
			Data    json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(p, &m); err != nil {
			return fmt.Errorf("waiting for %s: server sent invalid JSON %.200q", event, p)
		}
		switch {
		case m.Event == event && (channel == "" || m.Channel == channel):
			return nil
		case m.Event == "pusher:error" || m.Event == "pusher:subscription_error":
			return fmt.Errorf("waiting for %s: server sent %s %s", event, m.Event, m.Data)
		case m.Event == "pusher:ping":
			if err := c.pong(); err != nil {
				return err
			}
		}
	}
}

// run reads until the connection ends, answering pings and recording fan-out deliveries when
// rec is not nil. It closes c.done when it returns.
func (c *client) run(rec *recorder) {
	defer func() {
		c.wmu.Lock()
		c.lost = !c.closing
		c.wmu.Unlock()
		close(c.done)
	}()
	if rec != nil {
		c.samples = make([]sample, 0, rec.events)
	}
	for {
		p, err := c.next()
		if err != nil {
			c.err = err
			return
		}
		now := time.Now().UnixNano()
		if rec != nil {
			if seq, sent, ok := parseBench(p); ok {
				c.samples = append(c.samples, sample{seq: int32(seq), lat: now - sent})
				rec.delivered()
				continue
			}
		}
		if isPusherPing(p) {
			if err := c.pong(); err != nil {
				c.err = err
				return
			}
		}
	}
}

func (c *client) pong() error {
	return c.write(opText, []byte(`{"event":"pusher:pong","data":{}}`))
}

// next returns the next text or binary message, answering WebSocket pings on the way. The
// slice is valid until the next call.
func (c *client) next() ([]byte, error) {
	c.buf = c.buf[:0]
	for {
		var h [2]byte
		if _, err := io.ReadFull(c.br, h[:]); err != nil {
			return nil, err
		}
		fin, op := h[0]&0x80 != 0, h[0]&0x0F
		masked := h[1]&0x80 != 0
		n := uint64(h[1] & 0x7F)
		switch n {
		case 126:
			var x [2]byte
			if _, err := io.ReadFull(c.br, x[:]); err != nil {
				return nil, err
			}
			n = uint64(binary.BigEndian.Uint16(x[:]))
		case 127:
			var x [8]byte
			if _, err := io.ReadFull(c.br, x[:]); err != nil {
				return nil, err
			}
			n = binary.BigEndian.Uint64(x[:])
		}
		var mask [4]byte
		if masked {
			if _, err := io.ReadFull(c.br, mask[:]); err != nil {
				return nil, err
			}
		}
		if op >= opClose { // control frame: read it on its own
			if n > 125 || !fin {
				return nil, fmt.Errorf("server sent an invalid control frame (opcode %d, %d bytes)", op, n)
			}
			p := make([]byte, n)
			if _, err := io.ReadFull(c.br, p); err != nil {
				return nil, err
			}
			unmask(p, mask, masked)
			switch op {
			case opClose:
				e := &closedError{code: 1005}
				if len(p) >= 2 {
					e.code, e.reason = int(binary.BigEndian.Uint16(p)), string(p[2:])
				}
				return nil, e
			case opPing:
				if err := c.write(opPong, p); err != nil {
					return nil, err
				}
			}
			continue
		}
		if uint64(len(c.buf))+n > maxMessageBytes {
			return nil, fmt.Errorf("server message over %d bytes", maxMessageBytes)
		}
		start := len(c.buf)
		c.buf = slices.Grow(c.buf, int(n))[:start+int(n)]
		if _, err := io.ReadFull(c.br, c.buf[start:]); err != nil {
			return nil, err
		}
		unmask(c.buf[start:], mask, masked)
		if fin && (op == opText || op == opBinary || op == opContinuation) {
			return c.buf, nil
		}
	}
}

func unmask(p []byte, mask [4]byte, masked bool) {
	if !masked {
		return
	}
	for i := range p {
		p[i] ^= mask[i&3]
	}
}

// write sends one masked frame.
func (c *client) write(op byte, payload []byte) error {
	b := make([]byte, 0, len(payload)+14)
	b = append(b, 0x80|op)
	switch n := len(payload); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n <= 0xFFFF:
		b = append(b, 0x80|126, byte(n>>8), byte(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	// The mask only has to differ between frames; it guards proxies, not secrets.
	m := mrand.Uint32()
	b = binary.BigEndian.AppendUint32(b, m)
	mask := [4]byte{byte(m >> 24), byte(m >> 16), byte(m >> 8), byte(m)}
	for i, x := range payload {
		b = append(b, x^mask[i&3])
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.nc.Write(b)
	return err
}

// close sends a normal close frame and closes the socket; run then returns. Safe to call
// while run is running, and more than once.
func (c *client) close() {
	c.wmu.Lock()
	if c.closing {
		c.wmu.Unlock()
		return
	}
	c.closing = true
	_ = c.nc.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = c.nc.Write(closeFrame)
	c.wmu.Unlock()
	c.nc.Close()
}

// closeFrame is a masked close frame with status 1000 (normal closure).
var closeFrame = func() []byte {
	mask := [4]byte{0x12, 0x34, 0x56, 0x78}
	b := []byte{0x80 | opClose, 0x80 | 2, mask[0], mask[1], mask[2], mask[3], 0x03, 0xE8}
	b[6] ^= mask[0]
	b[7] ^= mask[1]
	return b
}()

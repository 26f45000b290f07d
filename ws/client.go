package ws

import (
	"bufio"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"slices"
)

// The client end of a connection (herald-bench): the opening handshake and the frames before
// the socket is attached to an Engine with Config.Client set, and the masked frames it writes.

// AppendClientFrame appends one final client frame carrying payload, masked with a fresh
// random key (RFC 6455 §5.3: the key guards intermediaries from crafted bytes; it is no secret).
func AppendClientFrame(dst []byte, op Opcode, payload []byte) []byte {
	dst = append(dst, 0x80|byte(op))
	switch n := len(payload); {
	case n < 126:
		dst = append(dst, 0x80|byte(n))
	case n <= 0xFFFF:
		dst = append(dst, 0x80|126, byte(n>>8), byte(n))
	default:
		dst = append(dst, 0x80|127)
		dst = binary.BigEndian.AppendUint64(dst, uint64(n))
	}
	var mask [4]byte
	binary.LittleEndian.PutUint32(mask[:], mrand.Uint32())
	dst = append(dst, mask[:]...)
	start := len(dst)
	dst = append(dst, payload...)
	unmask(dst[start:], mask)
	return dst
}

// ClientHandshake sends the opening handshake for uri (path and query) on host through w and
// reads the server's answer from br: it must switch protocols with the right
// Sec-WebSocket-Accept. Frames that follow the answer stay in br.
func ClientHandshake(w io.Writer, br *bufio.Reader, host, uri string) error {
	var k [16]byte
	_, _ = rand.Read(k[:])
	key := base64.StdEncoding.EncodeToString(k[:])
	req := "GET " + uri + " HTTP/1.1\r\nHost: " + host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: " + key + "\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := io.WriteString(w, req); err != nil {
		return err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		resp.Body.Close()
		return fmt.Errorf("server answered %s: %q", resp.Status, body)
	}
	sum := sha1.Sum([]byte(key + acceptGUID))
	want := base64.StdEncoding.EncodeToString(sum[:])
	if got := resp.Header.Get("Sec-WebSocket-Accept"); got != want {
		return fmt.Errorf("server answered Sec-WebSocket-Accept %q, want %q", got, want)
	}
	return nil
}

// MessageReader reads a server's messages from R before the connection is attached to an
// Engine (the client's opening phase). The zero value is not usable: set R and Max.
type MessageReader struct {
	R   *bufio.Reader
	Max int // largest message accepted

	buf  []byte // the message being read; reused
	op   Opcode // opcode of a fragmented message in progress
	done bool   // buf holds a message already returned
}

// Next returns the next text or binary message (fragments joined) or control frame (ping,
// pong, close), whichever completes first. A control frame between fragments is returned on
// its own and the message goes on at the following call. The result is valid until then.
func (m *MessageReader) Next() (Opcode, []byte, error) {
	if m.done {
		m.buf, m.done = m.buf[:0], false
	}
	for {
		head, err := m.R.Peek(2)
		if err != nil {
			return 0, nil, err
		}
		if head[1]&0x80 != 0 {
			return 0, nil, errors.New("ws: server sent a masked frame")
		}
		size := 2
		switch head[1] & 0x7F {
		case 126:
			size = 4
		case 127:
			size = 10
		}
		if head, err = m.R.Peek(size); err != nil {
			return 0, nil, err
		}
		h, _, bad := parseFrameHeader(head, m.Max, false)
		if bad != nil {
			return 0, nil, fmt.Errorf("ws: server broke the protocol: %s", bad.reason)
		}
		_, _ = m.R.Discard(size)
		if h.op >= OpClose {
			p := make([]byte, h.length)
			if _, err := io.ReadFull(m.R, p); err != nil {
				return 0, nil, err
			}
			return h.op, p, nil
		}
		switch {
		case h.op == OpContinuation && m.op == 0:
			return 0, nil, errors.New("ws: server sent a continuation without a message")
		case h.op != OpContinuation && m.op != 0:
			return 0, nil, errors.New("ws: server sent a new message inside a fragmented one")
		case h.op != OpContinuation:
			m.op = h.op
		}
		if len(m.buf)+h.length > m.Max {
			return 0, nil, fmt.Errorf("ws: server message over %d bytes", m.Max)
		}
		start := len(m.buf)
		m.buf = slices.Grow(m.buf, h.length)[:start+h.length]
		if _, err := io.ReadFull(m.R, m.buf[start:]); err != nil {
			return 0, nil, err
		}
		if h.fin {
			op := m.op
			m.op, m.done = 0, true
			return op, m.buf, nil
		}
	}
}

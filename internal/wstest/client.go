package wstest

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// Client is one WebSocket connection.
type Client struct {
	Conn net.Conn
	r    *bufio.Reader
}

// HandshakeTimeout bounds Dial's connect and the opening handshake. Tests run on busy machines
// (two cores shared with other builds, -race), so it is generous; a handshake with a local
// server takes milliseconds.
const HandshakeTimeout = 30 * time.Second

// Dial opens a WebSocket to ws://addr/path and completes the handshake.
func Dial(addr, path string) (*Client, error) {
	nc, err := net.DialTimeout("tcp", addr, HandshakeTimeout)
	if err != nil {
		return nil, err
	}
	c, err := Handshake(nc, addr, path)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// Handshake performs the opening handshake on nc.
func Handshake(nc net.Conn, host, path string) (*Client, error) {
	return HandshakeWith(nc, host, path, nil)
}

// HandshakeWith performs the opening handshake on nc with extra request headers.
func HandshakeWith(nc net.Conn, host, path string, header map[string]string) (*Client, error) {
	var k [16]byte
	_, _ = rand.Read(k[:])
	key := base64.StdEncoding.EncodeToString(k[:])
	req := "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: " + key + "\r\nSec-WebSocket-Version: 13\r\n"
	for k, v := range header {
		req += k + ": " + v + "\r\n"
	}
	req += "\r\n"
	_ = nc.SetDeadline(time.Now().Add(HandshakeTimeout))
	if _, err := io.WriteString(nc, req); err != nil {
		return nil, err
	}
	r := bufio.NewReader(nc)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		return nil, fmt.Errorf("handshake: status %d", resp.StatusCode)
	}
	_ = nc.SetDeadline(time.Time{})
	return &Client{Conn: nc, r: r}, nil
}

// WriteFrame sends one masked frame.
func (c *Client) WriteFrame(fin bool, op byte, payload []byte) error {
	b := make([]byte, 0, len(payload)+14)
	first := op
	if fin {
		first |= 0x80
	}
	b = append(b, first)
	n := len(payload)
	switch {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n <= 0xFFFF:
		b = append(b, 0x80|126, byte(n>>8), byte(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	var mask [4]byte
	_, _ = rand.Read(mask[:])
	b = append(b, mask[:]...)
	for i, x := range payload {
		b = append(b, x^mask[i%4])
	}
	_, err := c.Conn.Write(b)
	return err
}

// WriteText sends one text message.
func (c *Client) WriteText(s string) error { return c.WriteFrame(true, 0x1, []byte(s)) }

// WriteJSON sends v as one text message.
func (c *Client) WriteJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.WriteFrame(true, 0x1, b)
}

// Frame is one frame from the server.
type Frame struct {
	Op      byte
	Payload []byte
}

// CloseCode returns the status code of a close frame (0 if none).
func (f Frame) CloseCode() int {
	if f.Op != 0x8 || len(f.Payload) < 2 {
		return 0
	}
	return int(binary.BigEndian.Uint16(f.Payload))
}

// ReadFrame reads one frame, waiting at most d.
func (c *Client) ReadFrame(d time.Duration) (Frame, error) {
	_ = c.Conn.SetReadDeadline(time.Now().Add(d))
	var h [2]byte
	if _, err := io.ReadFull(c.r, h[:]); err != nil {
		return Frame{}, err
	}
	if h[1]&0x80 != 0 {
		return Frame{}, errors.New("server frame is masked")
	}
	n := uint64(h[1] & 0x7F)
	switch n {
	case 126:
		var x [2]byte
		if _, err := io.ReadFull(c.r, x[:]); err != nil {
			return Frame{}, err
		}
		n = uint64(binary.BigEndian.Uint16(x[:]))
	case 127:
		var x [8]byte
		if _, err := io.ReadFull(c.r, x[:]); err != nil {
			return Frame{}, err
		}
		n = binary.BigEndian.Uint64(x[:])
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(c.r, p); err != nil {
		return Frame{}, err
	}
	return Frame{Op: h[0] & 0x0F, Payload: p}, nil
}

// Message is a decoded Pusher message from the server; Data keeps its raw JSON.
type Message struct {
	Event   string          `json:"event"`
	Channel string          `json:"channel"`
	Data    json.RawMessage `json:"data"`
	UserID  string          `json:"user_id"`
	// Close is set instead when the server sent a close frame.
	Close int `json:"-"`
}

// DataString returns Data unquoted when it is a JSON string, else as raw text.
func (m Message) DataString() string {
	var s string
	if json.Unmarshal(m.Data, &s) == nil {
		return s
	}
	return string(m.Data)
}

// Read returns the next Pusher message or close frame, skipping WebSocket pings and pongs.
func (c *Client) Read(d time.Duration) (Message, error) {
	deadline := time.Now().Add(d)
	for {
		f, err := c.ReadFrame(time.Until(deadline))
		if err != nil {
			return Message{}, err
		}
		switch f.Op {
		case 0x8:
			return Message{Close: f.CloseCode()}, nil
		case 0x1:
			var m Message
			if err := json.Unmarshal(f.Payload, &m); err != nil {
				return Message{}, fmt.Errorf("bad JSON from server %q: %w", f.Payload, err)
			}
			return m, nil
		}
	}
}

// Expect reads messages until one has the event name, failing on a close frame or timeout.
func (c *Client) Expect(event string, d time.Duration) (Message, error) {
	deadline := time.Now().Add(d)
	var seen []string
	for {
		m, err := c.Read(time.Until(deadline))
		if err != nil {
			return m, fmt.Errorf("waiting for %s (saw %s): %w", event, strings.Join(seen, ", "), err)
		}
		if m.Close != 0 {
			return m, fmt.Errorf("waiting for %s: closed with %d (saw %s)", event, m.Close, strings.Join(seen, ", "))
		}
		if m.Event == event {
			return m, nil
		}
		seen = append(seen, m.Event)
	}
}

// ExpectClose reads until a close frame and returns its code.
func (c *Client) ExpectClose(d time.Duration) (int, error) {
	deadline := time.Now().Add(d)
	for {
		m, err := c.Read(time.Until(deadline))
		if err != nil {
			return 0, fmt.Errorf("waiting for a close frame: %w", err)
		}
		if m.Close != 0 {
			return m.Close, nil
		}
	}
}

// SocketID reads pusher:connection_established and returns the socket id.
func (c *Client) SocketID(d time.Duration) (string, error) {
	m, err := c.Expect("pusher:connection_established", d)
	if err != nil {
		return "", err
	}
	var est struct {
		SocketID string `json:"socket_id"`
	}
	if err := json.Unmarshal([]byte(m.DataString()), &est); err != nil {
		return "", err
	}
	return est.SocketID, nil
}

// Subscribe sends pusher:subscribe.
func (c *Client) Subscribe(channel, auth, channelData string) error {
	d := map[string]string{"channel": channel}
	if auth != "" {
		d["auth"] = auth
	}
	if channelData != "" {
		d["channel_data"] = channelData
	}
	return c.WriteJSON(map[string]any{"event": "pusher:subscribe", "data": d})
}

// Close closes the socket.
func (c *Client) Close() error { return c.Conn.Close() }

package ws

import (
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"
)

// ErrNotWebSocket is returned by CheckHandshake for a request that is not a valid
// WebSocket opening handshake; answer it with HTTP 400.
var ErrNotWebSocket = errors.New("not a websocket handshake")

const acceptGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// CheckHandshake validates a WebSocket opening handshake (RFC 6455 §4.2.1) and returns the
// Sec-WebSocket-Accept value. Extensions (permessage-deflate) are never negotiated.
func CheckHandshake(r *http.Request) (string, error) {
	if r.Method != http.MethodGet ||
		!headerHas(r.Header, "Connection", "upgrade") ||
		!headerHas(r.Header, "Upgrade", "websocket") ||
		r.Header.Get("Sec-WebSocket-Version") != "13" {
		return "", ErrNotWebSocket
	}
	key := r.Header.Get("Sec-WebSocket-Key")
	if dec, err := base64.StdEncoding.DecodeString(key); err != nil || len(dec) != 16 {
		return "", ErrNotWebSocket
	}
	h := sha1.New()
	h.Write([]byte(key))
	h.Write([]byte(acceptGUID))
	return base64.StdEncoding.EncodeToString(h.Sum(nil)), nil
}

func headerHas(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// Hijack takes the connection from net/http, writes the 101 response followed by initial
// (pre-encoded frames, may be nil) in one write, and returns the connection with any bytes
// the client already sent after its request.
func Hijack(w http.ResponseWriter, accept string, initial []byte, timeout time.Duration) (net.Conn, []byte, error) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("ws: response cannot be hijacked")
	}
	nc, brw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	var pre []byte
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		pre = append([]byte(nil), b...)
	}
	resp := make([]byte, 0, 160+len(initial))
	resp = append(resp, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: "...)
	resp = append(resp, accept...)
	resp = append(resp, "\r\n\r\n"...)
	resp = append(resp, initial...)
	_ = nc.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := nc.Write(resp); err != nil {
		nc.Close()
		return nil, nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	return nc, pre, nil
}

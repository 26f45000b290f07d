package ws

import (
	"encoding/binary"
	"unicode/utf8"
)

// Opcode is a WebSocket frame opcode (RFC 6455 §5.2).
type Opcode byte

// The opcodes herald handles.
const (
	OpContinuation Opcode = 0x0
	OpText         Opcode = 0x1
	OpBinary       Opcode = 0x2
	OpClose        Opcode = 0x8
	OpPing         Opcode = 0x9
	OpPong         Opcode = 0xA
)

// Close status codes of RFC 6455 that herald sends itself.
const (
	CloseNormal        = 1000
	CloseGoingAway     = 1001
	CloseProtocolError = 1002
	CloseUnsupported   = 1003
	CloseInvalidData   = 1007
	ClosePolicy        = 1008
	CloseTooBig        = 1009
	CloseAbnormal      = 1006 // never sent: a connection that ended without a close frame
)

// AppendFrame appends one unmasked, final server frame carrying payload.
func AppendFrame(dst []byte, op Opcode, payload []byte) []byte {
	dst = append(dst, 0x80|byte(op))
	n := len(payload)
	switch {
	case n < 126:
		dst = append(dst, byte(n))
	case n <= 0xFFFF:
		dst = append(dst, 126, byte(n>>8), byte(n))
	default:
		dst = append(dst, 127)
		dst = binary.BigEndian.AppendUint64(dst, uint64(n))
	}
	return append(dst, payload...)
}

// TextFrame returns a new complete text frame for payload: the immutable bytes every
// recipient of an event shares.
func TextFrame(payload []byte) []byte {
	return AppendFrame(make([]byte, 0, len(payload)+10), OpText, payload)
}

// CloseFrame returns a close frame with a status code and a reason (cut to fit 125 bytes,
// at a character boundary: a peer fails the connection on a reason that is not UTF-8).
func CloseFrame(code int, reason string) []byte {
	if len(reason) > 123 {
		cut := 123
		for cut > 0 && !utf8.RuneStart(reason[cut]) {
			cut--
		}
		reason = reason[:cut]
	}
	p := make([]byte, 2, 2+len(reason))
	binary.BigEndian.PutUint16(p, uint16(code))
	p = append(p, reason...)
	return AppendFrame(nil, OpClose, p)
}

// frameHeader is a parsed frame header.
type frameHeader struct {
	fin    bool
	op     Opcode
	length int
	masked bool
	mask   [4]byte
	size   int // header bytes
}

// errFrame is a protocol violation with the close code to answer it with.
type errFrame struct {
	code   int
	reason string
}

// parseHeader parses a client frame header from b. It returns ok=false when b is too short.
func parseHeader(b []byte, maxLen int) (h frameHeader, ok bool, bad *errFrame) {
	return parseFrameHeader(b, maxLen, true)
}

// parseFrameHeader parses a frame header from b; masked says whether the peer must mask its
// frames (it is a client) or must not (it is a server). It returns ok=false when b is too short.
func parseFrameHeader(b []byte, maxLen int, masked bool) (h frameHeader, ok bool, bad *errFrame) {
	if len(b) < 2 {
		return h, false, nil
	}
	if b[0]&0x70 != 0 {
		return h, false, &errFrame{CloseProtocolError, "reserved bits set"}
	}
	h.fin = b[0]&0x80 != 0
	h.op = Opcode(b[0] & 0x0F)
	switch got := b[1]&0x80 != 0; {
	case masked && !got:
		return h, false, &errFrame{CloseProtocolError, "client frames must be masked"}
	case !masked && got:
		return h, false, &errFrame{CloseProtocolError, "server frames must not be masked"}
	}
	n := int(b[1] & 0x7F)
	h.size = 2
	switch n {
	case 126:
		if len(b) < 4 {
			return h, false, nil
		}
		n = int(binary.BigEndian.Uint16(b[2:]))
		h.size = 4
	case 127:
		if len(b) < 10 {
			return h, false, nil
		}
		v := binary.BigEndian.Uint64(b[2:])
		if v > uint64(maxLen) {
			return h, false, &errFrame{CloseTooBig, "message too big"}
		}
		n = int(v)
		h.size = 10
	}
	if h.op > OpPong || (h.op > OpBinary && h.op < OpClose) {
		return h, false, &errFrame{CloseProtocolError, "unknown opcode"}
	}
	if h.op >= OpClose && (!h.fin || n > 125) {
		return h, false, &errFrame{CloseProtocolError, "invalid control frame"}
	}
	if n > maxLen {
		return h, false, &errFrame{CloseTooBig, "message too big"}
	}
	if masked {
		if len(b) < h.size+4 {
			return h, false, nil
		}
		copy(h.mask[:], b[h.size:h.size+4])
		h.size += 4
	}
	h.masked = masked
	h.length = n
	return h, true, nil
}

// unmask XORs p with the mask in place.
func unmask(p []byte, mask [4]byte) {
	m := binary.LittleEndian.Uint32(mask[:])
	m64 := uint64(m) | uint64(m)<<32
	i := 0
	for ; i+8 <= len(p); i += 8 {
		v := binary.LittleEndian.Uint64(p[i:])
		binary.LittleEndian.PutUint64(p[i:], v^m64)
	}
	for ; i < len(p); i++ {
		p[i] ^= mask[i&3]
	}
}

// validUTF8 reports whether a text message is valid UTF-8 (RFC 6455 §8.1).
func validUTF8(p []byte) bool { return utf8.Valid(p) }

// MaxHeader is the largest server frame header: reserve it in front of a payload to frame the
// payload in place with FrameInPlace.
const MaxHeader = 10

// FrameInPlace turns buf[MaxHeader:] (a payload built after MaxHeader reserved bytes) into one
// final frame of type op by writing the header just before the payload, and returns it. It
// saves the copy and the allocation of framing a finished payload.
func FrameInPlace(buf []byte, op Opcode) []byte {
	n := len(buf) - MaxHeader
	var start int
	switch {
	case n < 126:
		start = MaxHeader - 2
		buf[start+1] = byte(n)
	case n <= 0xFFFF:
		start = MaxHeader - 4
		buf[start+1] = 126
		binary.BigEndian.PutUint16(buf[start+2:], uint16(n))
	default:
		start = 0
		buf[1] = 127
		binary.BigEndian.PutUint64(buf[2:], uint64(n))
	}
	buf[start] = 0x80 | byte(op)
	return buf[start:]
}

// ValidTextFrame reports whether frame is exactly one complete, unmasked, final text frame,
// as a server writes them, whose payload is valid UTF-8: bytes that may be written to a
// client as they are.
func ValidTextFrame(frame []byte) bool {
	p, ok := TextPayload(frame)
	return ok && validUTF8(p)
}

// TextPayload returns the payload of frame when frame is exactly one complete, unmasked,
// final text frame, as a server writes them; ok is false for anything else.
func TextPayload(frame []byte) (payload []byte, ok bool) {
	h, ok, bad := parseFrameHeader(frame, len(frame), false)
	if !ok || bad != nil || !h.fin || h.op != OpText || h.size+h.length != len(frame) {
		return nil, false
	}
	return frame[h.size:], true
}

package broker

import (
	"encoding/binary"
	"errors"

	"github.com/herald-rt/herald"
)

// wireVersion is the first byte of every encoded message. A node refuses versions it does
// not know (counted as dropped) rather than misreading them.
const wireVersion = 1

// MaxFieldBytes bounds each string field of an encoded message (app, channel, node, socket).
const MaxFieldBytes = 4096

// ErrMalformed is returned by DecodeMessage for bytes that are not an encoded message.
var ErrMalformed = errors.New("broker: malformed bus message")

// AppendMessage appends m's encoding to dst: a version byte, the kind, then app, channel,
// node and excluded socket id, each as a uvarint length and its bytes, then the payload to
// the end. Fields over MaxFieldBytes are not checked here: DecodeMessage refuses them.
func AppendMessage(dst []byte, m herald.BusMessage) []byte {
	dst = append(dst, wireVersion, byte(m.Kind))
	for _, s := range [...]string{m.App, m.Channel, m.Node, m.ExcludeSocket} {
		dst = binary.AppendUvarint(dst, uint64(len(s)))
		dst = append(dst, s...)
	}
	return append(dst, m.Payload...)
}

// EncodedSize is the length AppendMessage adds for m.
func EncodedSize(m herald.BusMessage) int {
	n := 2 + len(m.Payload)
	for _, s := range [...]string{m.App, m.Channel, m.Node, m.ExcludeSocket} {
		n += uvarintLen(uint64(len(s))) + len(s)
	}
	return n
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// DecodeMessage decodes bytes written by AppendMessage. The returned Payload aliases b; the
// strings are copies. Any other input, however it was made, returns ErrMalformed.
func DecodeMessage(b []byte) (herald.BusMessage, error) {
	var m herald.BusMessage
	if len(b) < 2 || b[0] != wireVersion {
		return m, ErrMalformed
	}
	m.Kind = herald.BusKind(b[1])
	b = b[2:]
	var fields [4]string
	for i := range fields {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > MaxFieldBytes || n > uint64(len(b)-k) {
			return herald.BusMessage{}, ErrMalformed
		}
		fields[i] = string(b[k : k+int(n)])
		b = b[k+int(n):]
	}
	m.App, m.Channel, m.Node, m.ExcludeSocket = fields[0], fields[1], fields[2], fields[3]
	m.Payload = b
	return m, nil
}

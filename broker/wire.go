package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/herald-rt/herald"
)

// wireVersion is the first byte of every encoded message. A node refuses versions it does
// not know (counted as dropped) rather than misreading them. Version 2 is version 1 with an
// origin time after the kind; it is written only for a message with an Origin, so a message
// without one is the same bytes as before version 2 existed, and every node decodes both.
// Version 3 is a position (Epoch, Offset) put in front of a version 1 or 2 encoding; it is
// written only for a message with an Offset, so messages without one keep their bytes.
// Version 4 is a sealed message (Auth). Any other first byte is a version this node does not
// know: DecodeMessage returns a *VersionError for it, which the engines count apart
// (BrokerStats.UnknownVersion), never misreading it as a message.
//
// A version from 5 on starts with its version byte, then the sending node's id (a uvarint
// length and its bytes), so that a node too old to read it can still say who sent it
// (VersionError.Node); what follows is the new version's own.
//
// Version 5 is a message with an idempotency key (herald.BusMessage.Key) and no position: 5,
// the sending node's id and the key (each a uvarint length and its bytes), then the version 1
// or 2 encoding of the message. It is written only for a message with a Key and no Offset
// (a history channel's event is kept once by its store, and its receivers know it by its
// offset); a sender writes keys only once every live node reads them (cluster.FeatureKeys).
const (
	wireVersion         = 1
	wireVersionOrigin   = 2
	wireVersionPosition = 3
	wireVersionKey      = 5
)

// MaxFieldBytes bounds each string field of an encoded message (app, channel, node, socket).
const MaxFieldBytes = 4096

// MaxEpochBytes bounds the Epoch of an encoded message (a position's epoch, as a client may
// send it back: docs/protocol.md).
const MaxEpochBytes = 64

// ErrMalformed is returned by DecodeMessage for bytes that are not an encoded message.
var ErrMalformed = errors.New("broker: malformed bus message")

// VersionError is a message of an envelope version this node does not know, refused unread:
// a node of a later release sent it (docs/cluster.md, upgrading node by node).
type VersionError struct {
	Version byte   // the message's first byte
	Node    string // the sender, when the version follows the rule of versions from 5 on; else ""
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("broker: bus message of unknown wire version %d from node %q", e.Version, e.Node)
}

// knownVersion reports whether v is an envelope version this node reads.
func knownVersion(v byte) bool { return v >= wireVersion && v <= wireVersionKey }

// unknownVersion is the VersionError of b, whose first byte is not a known version: the
// sender's node id is read as every version from 5 on puts it, when it looks like one.
func unknownVersion(b []byte) *VersionError {
	e := &VersionError{Version: b[0]}
	if n, k := binary.Uvarint(b[1:]); k > 0 && n <= MaxFieldBytes && n <= uint64(len(b)-1-k) {
		e.Node = strings.ToValidUTF8(string(b[1+k:1+k+int(n)]), "?")
	}
	return e
}

// AppendMessage appends m's encoding to dst. With an Offset it is version 3: the version
// byte, the epoch's length as one byte and its bytes, the offset as 8 bytes big-endian, then
// the version 1 or 2 encoding of m (AppendPlain). Without one it is AppendPlain's alone.
// Fields over MaxFieldBytes and an epoch over MaxEpochBytes are not checked here:
// DecodeMessage refuses them.
//
// The position is a prefix so that a Redis script can put it in front of bytes a node
// encoded before the offset was known (broker/redis); that script writes this layout too.
func AppendMessage(dst []byte, m herald.BusMessage) []byte {
	if m.Key != "" && m.Offset == 0 {
		dst = append(dst, wireVersionKey)
		dst = binary.AppendUvarint(dst, uint64(len(m.Node)))
		dst = append(dst, m.Node...)
		dst = binary.AppendUvarint(dst, uint64(len(m.Key)))
		dst = append(dst, m.Key...)
		return AppendPlain(dst, m)
	}
	if m.Offset != 0 {
		dst = append(dst, wireVersionPosition, byte(len(m.Epoch)))
		dst = append(dst, m.Epoch...)
		dst = binary.BigEndian.AppendUint64(dst, m.Offset)
	}
	return AppendPlain(dst, m)
}

// AppendPlain appends m's encoding without its position: a version byte, the kind,
// (version 2 only: the origin as 8 bytes, big-endian), then app, channel, node and excluded
// socket id, each as a uvarint length and its bytes, then the payload to the end.
func AppendPlain(dst []byte, m herald.BusMessage) []byte {
	if m.Origin != 0 {
		dst = append(dst, wireVersionOrigin, byte(m.Kind))
		dst = binary.BigEndian.AppendUint64(dst, uint64(m.Origin))
	} else {
		dst = append(dst, wireVersion, byte(m.Kind))
	}
	for _, s := range [...]string{m.App, m.Channel, m.Node, m.ExcludeSocket} {
		dst = binary.AppendUvarint(dst, uint64(len(s)))
		dst = append(dst, s...)
	}
	return append(dst, m.Payload...)
}

// EncodedSize is the length AppendMessage adds for m.
func EncodedSize(m herald.BusMessage) int {
	n := 2 + len(m.Payload)
	if m.Offset != 0 {
		n += 2 + len(m.Epoch) + 8
	} else if m.Key != "" {
		n += 1 + uvarintLen(uint64(len(m.Node))) + len(m.Node) + uvarintLen(uint64(len(m.Key))) + len(m.Key)
	}
	if m.Origin != 0 {
		n += 8
	}
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

// DecodeMessage decodes bytes written by AppendMessage, of any version. The returned
// Payload aliases b; the strings are copies. Bytes starting with a version this node does not
// know return a *VersionError. Any other input, however it was made (a version
// 2 message with a zero origin, a version 3 one with a zero offset, an epoch over
// MaxEpochBytes, a position in front of a position), returns ErrMalformed.
func DecodeMessage(b []byte) (herald.BusMessage, error) {
	if len(b) > 0 && !knownVersion(b[0]) {
		return herald.BusMessage{}, unknownVersion(b)
	}
	if len(b) > 0 && b[0] == wireVersionKey {
		return decodeKeyed(b)
	}
	if len(b) < 2 || b[0] != wireVersionPosition {
		return decodePlain(b)
	}
	n := int(b[1])
	if n > MaxEpochBytes || len(b) < 2+n+8 {
		return herald.BusMessage{}, ErrMalformed
	}
	epoch := string(b[2 : 2+n])
	offset := binary.BigEndian.Uint64(b[2+n:])
	if offset == 0 {
		return herald.BusMessage{}, ErrMalformed
	}
	m, err := decodePlain(b[2+n+8:])
	m.Epoch, m.Offset = epoch, offset
	if err != nil {
		return herald.BusMessage{}, err
	}
	return m, nil
}

// decodeKeyed decodes a version 5 encoding: a keyed message without a position.
func decodeKeyed(b []byte) (herald.BusMessage, error) {
	var fields [2]string // node, key
	b, ok := readFields(b[1:], fields[:])
	if !ok || fields[1] == "" || len(fields[1]) > herald.MaxKeyBytes {
		return herald.BusMessage{}, ErrMalformed
	}
	m, err := decodePlain(b)
	if err != nil || m.Node != fields[0] {
		return herald.BusMessage{}, ErrMalformed
	}
	m.Key = fields[1]
	return m, nil
}

// decodePlain decodes a version 1 or 2 encoding (AppendPlain).
func decodePlain(b []byte) (herald.BusMessage, error) {
	var m herald.BusMessage
	if len(b) < 2 || (b[0] != wireVersion && b[0] != wireVersionOrigin) {
		return m, ErrMalformed
	}
	m.Kind = herald.BusKind(b[1])
	if b[0] == wireVersionOrigin {
		if len(b) < 10 {
			return herald.BusMessage{}, ErrMalformed
		}
		if m.Origin = int64(binary.BigEndian.Uint64(b[2:10])); m.Origin == 0 {
			return herald.BusMessage{}, ErrMalformed
		}
		b = b[8:]
	}
	var fields [4]string
	b, ok := readFields(b[2:], fields[:])
	if !ok {
		return herald.BusMessage{}, ErrMalformed
	}
	m.App, m.Channel, m.Node, m.ExcludeSocket = fields[0], fields[1], fields[2], fields[3]
	m.Payload = b
	return m, nil
}

// readFields reads len(fields) strings off b, each a uvarint length (at most MaxFieldBytes)
// and its bytes, and returns what follows; false when b does not hold them.
func readFields(b []byte, fields []string) ([]byte, bool) {
	for i := range fields {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > MaxFieldBytes || n > uint64(len(b)-k) {
			return nil, false
		}
		fields[i] = string(b[k : k+int(n)])
		b = b[k+int(n):]
	}
	return b, true
}

package broker

import (
	"bytes"
	"strings"
	"testing"

	"github.com/herald-rt/herald"
)

func TestMessageRoundTrip(t *testing.T) {
	cases := []herald.BusMessage{
		{},
		{Kind: herald.BusEvent, App: "1", Channel: "private-a.b@c=d;e", Node: "n1", ExcludeSocket: "123.456", Payload: []byte("\x81\x05hello")},
		{Kind: herald.BusState, App: strings.Repeat("a", 300), Channel: herald.UserChannelPrefix + "u", Node: "node", Payload: bytes.Repeat([]byte{0}, 100<<10)},
		{Kind: 200, App: "x"},
		{Kind: herald.BusEvent, App: "1", Channel: "BTC.trade", Node: "n2", Origin: 1_764_000_000_123_456_789, Payload: []byte("\x81\x01x")},
		{Kind: herald.BusCache, Channel: "cache", Origin: -1},
		{Kind: herald.BusEvent, Origin: 1},
		{Kind: herald.BusEvent, App: "1", Channel: "auction-1", Node: "n1", Epoch: "3f9c1a0e", Offset: 41, Payload: []byte("\x81\x01x")},
		{Kind: herald.BusEvent, App: "1", Channel: "a", Origin: 7, Epoch: strings.Repeat("e", MaxEpochBytes), Offset: 1<<64 - 1},
		{Kind: herald.BusEvent, Offset: 1},
		{Kind: herald.BusEvent, App: "1", Channel: "orders", Node: "n3", Key: "order-17", Payload: []byte("\x81\x01x")},
		{Kind: herald.BusEvent, App: "1", Channel: "orders", Node: "n3", Key: strings.Repeat("k", herald.MaxKeyBytes), Origin: 9, ExcludeSocket: "1.2"},
		{Kind: herald.BusEvent, App: "1", Channel: "auction-1", Node: "n1", Key: "on-the-store", Epoch: "e", Offset: 4}, // a position: no key on the wire
	}
	for _, m := range cases {
		b := AppendMessage([]byte("junk"), m)[4:]
		if len(b) != EncodedSize(m) {
			t.Errorf("EncodedSize = %d, encoded %d bytes", EncodedSize(m), len(b))
		}
		got, err := DecodeMessage(b)
		if err != nil {
			t.Fatalf("decode %+v: %v", m, err)
		}
		if got.Kind != m.Kind || got.App != m.App || got.Channel != m.Channel || got.Node != m.Node ||
			got.ExcludeSocket != m.ExcludeSocket || got.Origin != m.Origin || got.Epoch != m.Epoch || got.Offset != m.Offset ||
			!bytes.Equal(got.Payload, m.Payload) || (m.Offset == 0) && got.Key != m.Key || m.Offset != 0 && got.Key != "" {
			t.Errorf("round trip of %+v gave %+v", m, got)
		}
	}
}

// TestWireVersions: a message without an origin is the same bytes as before version 2 (so
// nodes that know only version 1 still read it), one with an origin is version 2, and both
// decode; bytes a version-1 node wrote decode as they did.
func TestWireVersions(t *testing.T) {
	v1 := []byte("\x01\x01\x011\x04chat\x02n1\x00frame")
	m := herald.BusMessage{Kind: herald.BusEvent, App: "1", Channel: "chat", Node: "n1", Payload: []byte("frame")}
	if got := AppendMessage(nil, m); !bytes.Equal(got, v1) {
		t.Errorf("without origin: %q, want the version 1 bytes %q", got, v1)
	}
	if got, err := DecodeMessage(v1); err != nil || got.Origin != 0 || got.App != "1" || string(got.Payload) != "frame" {
		t.Errorf("decode version 1: %+v, %v", got, err)
	}
	m.Origin = 0x0102030405060708
	v2 := []byte("\x02\x01\x01\x02\x03\x04\x05\x06\x07\x08\x011\x04chat\x02n1\x00frame")
	if got := AppendMessage(nil, m); !bytes.Equal(got, v2) {
		t.Errorf("with origin: %q, want %q", got, v2)
	}
	if got, err := DecodeMessage(v2); err != nil || got.Origin != m.Origin || got.Channel != "chat" || string(got.Payload) != "frame" {
		t.Errorf("decode version 2: %+v, %v", got, err)
	}
}

// TestWirePosition: a position is version 3, a prefix in front of the bytes the message has
// without it (what broker/redis's script relies on), and an Epoch is carried only with an
// Offset.
func TestWirePosition(t *testing.T) {
	m := herald.BusMessage{Kind: herald.BusEvent, App: "1", Channel: "chat", Node: "n1", Payload: []byte("frame")}
	plain := AppendMessage(nil, m)
	m.Epoch, m.Offset = "ep", 0x0102030405060708
	want := append([]byte("\x03\x02ep\x01\x02\x03\x04\x05\x06\x07\x08"), plain...)
	if got := AppendMessage(nil, m); !bytes.Equal(got, want) {
		t.Errorf("with a position: %q, want %q", got, want)
	}
	if got, err := DecodeMessage(want); err != nil || got.Epoch != "ep" || got.Offset != m.Offset || got.Channel != "chat" || string(got.Payload) != "frame" {
		t.Errorf("decode version 3: %+v, %v", got, err)
	}
	m.Offset = 0 // an epoch without an offset is no position: not sent
	if got := AppendMessage(nil, m); !bytes.Equal(got, plain) {
		t.Errorf("epoch without offset: %q, want the plain bytes %q", got, plain)
	}
}

func TestDecodeRefuses(t *testing.T) {
	good := AppendMessage(nil, herald.BusMessage{Kind: herald.BusEvent, App: "a", Channel: "c", Node: "n"})
	pos := []byte{wireVersionPosition, 0, 0, 0, 0, 0, 0, 0, 0, 1} // an empty epoch, offset 1
	long := make([]byte, MaxEpochBytes+1+8)                       // an epoch over the bound and an offset
	long[len(long)-1] = 1
	bad := [][]byte{nil, {wireVersion}, {2, 1, 0, 0, 0, 0}, good[:len(good)-1],
		append([]byte{wireVersion, 1}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
		append([]byte{wireVersion, 1, 0x81, 0x40}, make([]byte, 8300)...), // field over MaxFieldBytes
		{wireVersionOrigin, 1, 0, 0, 0, 0, 0, 0, 0},                       // origin cut short
		{wireVersionOrigin, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},        // version 2 with no origin
		{4, 1, 0, 0, 0, 0},
		append([]byte{wireVersionPosition, 0, 0, 0, 0, 0, 0, 0, 0, 0}, good...),          // offset 0
		{wireVersionPosition, 1, 'e', 0, 0, 0, 0, 0, 0, 0},                               // offset cut short
		append([]byte{wireVersionPosition, MaxEpochBytes + 1}, append(long, good...)...), // epoch too long
		pos,                                  // no message after the position
		append(append(pos, pos...), good...), // two positions
		append(pos, good[:len(good)-1]...),
		append([]byte{wireVersionKey, 1, 'n', 0}, good...),                      // an empty key
		append([]byte{wireVersionKey, 1, 'm', 1, 'k'}, good...),                 // another node inside
		{wireVersionKey, 1, 'n', 5, 'k'},                                        // key cut short
		append([]byte{wireVersionKey, 1, 'n', 1, 'k'}, append(pos, good...)...), // a position inside
		append([]byte{wireVersionKey, 1, 'n', 1, 'k', wireVersionKey, 1, 'n', 1, 'k'}, good...)}
	for _, b := range bad {
		if _, err := DecodeMessage(b); err != ErrMalformed {
			t.Errorf("DecodeMessage(%q) err = %v, want ErrMalformed", b, err)
		}
	}
}

func FuzzDecodeMessage(f *testing.F) {
	f.Add(AppendMessage(nil, herald.BusMessage{Kind: herald.BusEvent, App: "a", Channel: "c", Node: "n", ExcludeSocket: "1.2", Payload: []byte("p")}))
	f.Add(AppendMessage(nil, herald.BusMessage{Kind: herald.BusCache, Channel: "cache", Origin: 42, Payload: []byte("p")}))
	f.Add(AppendMessage(nil, herald.BusMessage{Kind: herald.BusEvent, App: "a", Channel: "c", Origin: 42, Epoch: "ep", Offset: 9, Payload: []byte("p")}))
	f.Add(AppendMessage(nil, herald.BusMessage{Kind: herald.BusEvent, App: "a", Channel: "c", Node: "n", Key: "k-1", Payload: []byte("p")}))
	f.Add([]byte{wireVersion, 1, 0x80})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMessage(b)
		if err != nil {
			return
		}
		// What decodes re-encodes to the same bytes.
		if again := AppendMessage(nil, m); !bytes.Equal(again, b) && uvarintsMinimal(b) {
			t.Fatalf("decode/encode changed %q to %q", b, again)
		}
	})
}

// uvarintsMinimal is false when b spells a length with redundant continuation bytes, which
// decodes but re-encodes shorter.
func uvarintsMinimal(b []byte) bool {
	m, _ := DecodeMessage(b)
	return len(b) == EncodedSize(m)
}

func TestSubject(t *testing.T) {
	cases := map[[2]string]string{
		{"1", "chat"}:        "herald.1.chat",
		{"1", "private-a.b"}: "herald.1.private-a%2Eb",
		{"a.b", "c"}:         "herald.a%2Eb.c",
		{"", "x"}:            "herald.%.x",
		{"1", "#server-to-user-u@x=y,z;w_v%*>: "}: "herald.1.#server-to-user-u@x=y,z;w_v%25%2A%3E%3A%20",
	}
	for in, want := range cases {
		if got := Subject("herald", in[0], in[1]); got != want {
			t.Errorf("Subject(%q, %q) = %q, want %q", in[0], in[1], got, want)
		}
	}
	if got := "p." + Token("a.b") + "." + Token(""); got != Subject("p", "a.b", "") {
		t.Errorf("Token: %q, want Subject's tokens %q", got, Subject("p", "a.b", ""))
	}
	if Subject("p", "a.b", "c") == Subject("p", "a", "b.c") {
		t.Error("two (app, channel) pairs share a subject")
	}
	for p, ok := range map[string]bool{"herald": true, "a.b": true, "": false, "a..b": false, ".a": false, "a b": false, "a.*": false} {
		if ValidPrefix(p) != ok {
			t.Errorf("ValidPrefix(%q) = %v", p, !ok)
		}
	}
}

// TestKindValues: the kinds are on the wire between nodes of different versions; their
// values never change (2 is retired; the console's own kind is 32, see console.BusKind).
func TestKindValues(t *testing.T) {
	for _, k := range []struct {
		name      string
		got, want herald.BusKind
	}{{"BusEvent", herald.BusEvent, 1}, {"BusState", herald.BusState, 3}, {"BusCache", herald.BusCache, 4}, {"BusTerminate", herald.BusTerminate, 5}} {
		if k.got != k.want {
			t.Errorf("%s = %d, want %d", k.name, k.got, k.want)
		}
	}
}

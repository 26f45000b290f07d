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
		{Kind: herald.BusUser, App: strings.Repeat("a", 300), Channel: herald.UserChannelPrefix + "u", Node: "node", Payload: bytes.Repeat([]byte{0}, 100<<10)},
		{Kind: 200, App: "x"},
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
			got.ExcludeSocket != m.ExcludeSocket || !bytes.Equal(got.Payload, m.Payload) {
			t.Errorf("round trip of %+v gave %+v", m, got)
		}
	}
}

func TestDecodeRefuses(t *testing.T) {
	good := AppendMessage(nil, herald.BusMessage{Kind: herald.BusEvent, App: "a", Channel: "c", Node: "n"})
	bad := [][]byte{nil, {wireVersion}, {2, 1, 0, 0, 0, 0}, good[:len(good)-1],
		append([]byte{wireVersion, 1}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
		append([]byte{wireVersion, 1, 0x81, 0x40}, make([]byte, 8300)...)} // field over MaxFieldBytes
	for _, b := range bad {
		if _, err := DecodeMessage(b); err != ErrMalformed {
			t.Errorf("DecodeMessage(%q) err = %v, want ErrMalformed", b, err)
		}
	}
}

func FuzzDecodeMessage(f *testing.F) {
	f.Add(AppendMessage(nil, herald.BusMessage{Kind: herald.BusEvent, App: "a", Channel: "c", Node: "n", ExcludeSocket: "1.2", Payload: []byte("p")}))
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
	if Subject("p", "a.b", "c") == Subject("p", "a", "b.c") {
		t.Error("two (app, channel) pairs share a subject")
	}
	for p, ok := range map[string]bool{"herald": true, "a.b": true, "": false, "a..b": false, ".a": false, "a b": false, "a.*": false} {
		if ValidPrefix(p) != ok {
			t.Errorf("ValidPrefix(%q) = %v", p, !ok)
		}
	}
}

package broker

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald"
)

var (
	secretA = []byte(strings.Repeat("a", MinSecretBytes))
	secretB = []byte(strings.Repeat("b", MinSecretBytes))
)

// clock is a settable time for the Auths of a test.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newAuth(t testing.TB, c *clock, node string, cfg AuthConfig) *Auth {
	t.Helper()
	if cfg.Secret == nil {
		cfg.Secret = secretA
	}
	cfg.Now = c.now
	a, err := NewAuth(cfg, "herald", node)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func sampleMessages() []herald.BusMessage {
	return []herald.BusMessage{
		{Kind: herald.BusEvent, App: "app", Channel: "private-x", Node: "n1", Payload: []byte("\x81\x05hello")},
		{Kind: herald.BusState, App: "", Channel: "state", Node: "n1", ExcludeSocket: "1.2", Origin: 42, Payload: []byte{1, 2, 3}},
		{Kind: herald.BusEvent, App: "app", Channel: "h", Node: "n1", Epoch: "e1", Offset: 7, Payload: []byte("\x81\x01x")},
		{Kind: herald.BusTerminate, App: "app", Channel: "control", Node: "n1"},
		{Kind: herald.BusEvent, App: "app", Channel: "orders", Node: "n1", Key: "order-17", Payload: []byte("\x81\x01k")}, // wire version 5 inside
		// A bundle (cluster/bundle.go): sealed, and encrypted, as any message.
		{Kind: herald.BusBundle, App: "app", Channel: "ticker", Node: "n1", Payload: []byte("\x00\x00\x07\x81\x05hello\x00\x03\x04\x81\x02hi")},
	}
}

func TestAuthRoundTrip(t *testing.T) {
	c := &clock{time.Unix(1_800_000_000, 0)}
	for _, enc := range []bool{false, true} {
		send := newAuth(t, c, "n1", AuthConfig{Encrypt: enc})
		recv := newAuth(t, c, "n2", AuthConfig{})
		for _, m := range sampleMessages() {
			b := send.Seal(make([]byte, 0, SealedSize(m)), m)
			if len(b) != SealedSize(m) {
				t.Fatalf("encrypt %v: sealed %d bytes, SealedSize %d", enc, len(b), SealedSize(m))
			}
			if !enc && len(m.Payload) > 2 && !bytes.Contains(b, m.Payload) || enc && len(m.Payload) > 2 && bytes.Contains(b, m.Payload) {
				t.Fatalf("encrypt %v: payload in clear: %v", enc, bytes.Contains(b, m.Payload))
			}
			got, err := recv.Open(b)
			if err != nil {
				t.Fatalf("encrypt %v: Open: %v", enc, err)
			}
			if fmt.Sprint(got) != fmt.Sprint(m) {
				t.Fatalf("encrypt %v: got %+v, want %+v", enc, got, m)
			}
		}
	}
}

// TestAuthForged: a message without the secret, or with any byte of a sealed one changed, is
// refused as forged (a version byte altered, as of a version this node does not know); so is
// one sealed for another node id or another bus prefix.
func TestAuthForged(t *testing.T) {
	c := &clock{time.Unix(1_800_000_000, 0)}
	for _, enc := range []bool{false, true} {
		send := newAuth(t, c, "n1", AuthConfig{Encrypt: enc})
		recv := newAuth(t, c, "n2", AuthConfig{})
		m := sampleMessages()[2]
		b := send.Seal(nil, m)
		for i := range b {
			x := bytes.Clone(b)
			x[i] ^= 0x20
			_, err := recv.Open(x)
			var ve *VersionError
			if i == 0 || i == authHead { // a version byte: now one this node does not know
				if !errors.As(err, &ve) {
					t.Fatalf("encrypt %v: version byte %d altered: %v, want a VersionError", enc, i, err)
				}
				continue
			}
			if !errors.Is(err, ErrForged) {
				t.Fatalf("encrypt %v: byte %d altered: %v, want ErrForged", enc, i, err)
			}
		}
		for _, plain := range [][]byte{AppendMessage(nil, m), AppendPlain(nil, sampleMessages()[0]), nil, {4}} {
			if _, err := recv.Open(plain); !errors.Is(err, ErrForged) {
				t.Fatalf("unsealed %q: %v, want ErrForged", plain, err)
			}
		}
		other := newAuth(t, c, "n1", AuthConfig{Secret: secretB, Encrypt: enc})
		if _, err := recv.Open(other.Seal(nil, m)); !errors.Is(err, ErrForged) {
			t.Fatalf("another secret: %v", err)
		}
		pre, err := NewAuth(AuthConfig{Secret: secretA, Now: c.now}, "other", "n1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := recv.Open(pre.Seal(nil, m)); !errors.Is(err, ErrForged) {
			t.Fatalf("another prefix: %v", err)
		}
		if _, err := recv.Open(b); err != nil {
			t.Fatalf("the original after the forgeries: %v", err)
		}
	}
}

func TestAuthReplay(t *testing.T) {
	c := &clock{time.Unix(1_800_000_000, 0)}
	send := newAuth(t, c, "n1", AuthConfig{})
	recv := newAuth(t, c, "n2", AuthConfig{})
	m := sampleMessages()[0]
	var sealed [][]byte
	for range 3 * replayWindow {
		sealed = append(sealed, send.Seal(nil, m))
	}
	open := func(i int) error { _, err := recv.Open(bytes.Clone(sealed[i])); return err }
	// Out of order within the window: each once.
	for _, i := range []int{5, 3, 4, 0, 1, 2} {
		if err := open(i); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	for _, i := range []int{0, 5, 3} {
		if err := open(i); !errors.Is(err, ErrReplayed) {
			t.Fatalf("message %d again: %v, want ErrReplayed", i, err)
		}
	}
	// Far ahead: the window moves; what fell out of it is refused, what did not is new.
	top := 2*replayWindow + 100
	if err := open(top); err != nil {
		t.Fatal(err)
	}
	if err := open(top - replayWindow); !errors.Is(err, ErrReplayed) {
		t.Fatalf("just out of the window: %v", err)
	}
	if err := open(top - replayWindow + 1); err != nil {
		t.Fatalf("last in the window: %v", err)
	}
	if err := open(10); !errors.Is(err, ErrReplayed) {
		t.Fatalf("long before the window: %v", err)
	}
	// Every message in order, from a fresh receiver: all accepted once.
	fresh := newAuth(t, c, "n3", AuthConfig{})
	for i, b := range sealed {
		if _, err := fresh.Open(bytes.Clone(b)); err != nil {
			t.Fatalf("in order, message %d: %v", i, err)
		}
	}
}

// TestAuthTime: a message sent more than the skew away is refused; a restarted node (a new
// epoch) is accepted beside the old one, whose messages stop being accepted once stale.
func TestAuthTime(t *testing.T) {
	c := &clock{time.Unix(1_800_000_000, 0)}
	send := newAuth(t, c, "n1", AuthConfig{})
	recv := newAuth(t, c, "n2", AuthConfig{MaxSkew: 10 * time.Second})
	m := sampleMessages()[1]
	old := send.Seal(nil, m)
	late := send.Seal(nil, m)
	if _, err := recv.Open(send.Seal(nil, m)); err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(30 * time.Second)
	if _, err := recv.Open(late); !errors.Is(err, ErrReplayed) {
		t.Fatalf("sent 30s ago: %v, want ErrReplayed", err)
	}
	restarted := newAuth(t, c, "n1", AuthConfig{})
	if _, err := recv.Open(restarted.Seal(nil, m)); err != nil {
		t.Fatalf("restarted sender: %v", err)
	}
	if _, err := recv.Open(old); !errors.Is(err, ErrReplayed) {
		t.Fatalf("previous run's message: %v", err)
	}
	future := restarted.Seal(nil, m)
	c.t = c.t.Add(-60 * time.Second) // the receiver's clock behind: a message from its future
	if _, err := recv.Open(future); !errors.Is(err, ErrReplayed) {
		t.Fatalf("a message sent 60s in the receiver's future: %v", err)
	}
	c.t = c.t.Add(60 * time.Second)
	// Unheard epochs are forgotten after twice the skew.
	c.t = c.t.Add(time.Minute)
	if _, err := recv.Open(restarted.Seal(nil, m)); err != nil {
		t.Fatal(err)
	}
	recv.mu.Lock()
	n := len(recv.senders)
	recv.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d sender epochs kept, want 1", n)
	}
}

// TestAuthRotation: a receiver that accepts a second secret opens messages sealed with
// either; one that does not refuses the other's.
func TestAuthRotation(t *testing.T) {
	c := &clock{time.Unix(1_800_000_000, 0)}
	oldNode := newAuth(t, c, "n1", AuthConfig{Secret: secretA})
	both := newAuth(t, c, "n2", AuthConfig{Secret: secretA, Accept: [][]byte{secretB}})
	newNode := newAuth(t, c, "n3", AuthConfig{Secret: secretB, Accept: [][]byte{secretA}})
	m := sampleMessages()[0]
	for _, s := range []*Auth{oldNode, newNode} {
		for _, r := range []*Auth{both, newNode, oldNode} {
			_, err := r.Open(s.Seal(nil, m))
			refused := s == newNode && r == oldNode
			if refused != errors.Is(err, ErrForged) || !refused && err != nil {
				t.Fatalf("sealed by %s, opened by %s: %v", s.node, r.node, err)
			}
		}
	}
	if _, err := NewAuth(AuthConfig{Secret: secretA[:MinSecretBytes-1]}, "herald", "n"); err == nil {
		t.Fatal("a short secret was taken")
	}
}

func TestAuthOpenStored(t *testing.T) {
	c := &clock{time.Unix(1_800_000_000, 0)}
	send := newAuth(t, c, "n1", AuthConfig{Encrypt: true})
	recv := newAuth(t, c, "n2", AuthConfig{})
	m := sampleMessages()[2]
	b := send.Seal(nil, m)
	c.t = c.t.Add(24 * time.Hour)
	for range 2 {
		got, err := recv.OpenStored(bytes.Clone(b))
		if err != nil || !bytes.Equal(got.Payload, m.Payload) || got.Offset != m.Offset {
			t.Fatalf("stored: %+v, %v", got, err)
		}
	}
	b[len(b)-1] ^= 1
	if _, err := recv.OpenStored(b); !errors.Is(err, ErrForged) {
		t.Fatalf("altered stored: %v", err)
	}
}

// TestAuthAllocs: Seal allocates nothing; Open no more than DecodeMessage (its strings).
func TestAuthAllocs(t *testing.T) {
	c := &clock{time.Unix(1_800_000_000, 0)}
	m := sampleMessages()[0]
	m.Node = "n1"
	plain := AppendMessage(nil, m)
	decode := testing.AllocsPerRun(100, func() { _, _ = DecodeMessage(plain) })
	for _, enc := range []bool{false, true} {
		send := newAuth(t, c, "n1", AuthConfig{Encrypt: enc})
		recv := newAuth(t, c, "n2", AuthConfig{})
		buf := make([]byte, 0, SealedSize(m))
		if n := testing.AllocsPerRun(100, func() { buf = send.Seal(buf[:0], m) }); n != 0 {
			t.Fatalf("encrypt %v: %v allocations per Seal, want 0", enc, n)
		}
		in := make([]byte, SealedSize(m))
		if n := testing.AllocsPerRun(100, func() {
			copy(in, send.Seal(buf[:0], m))
			if _, err := recv.Open(in); err != nil {
				t.Fatal(err)
			}
		}); n != decode {
			t.Fatalf("encrypt %v: %v allocations per Seal and Open, want DecodeMessage's %v", enc, n, decode)
		}
	}
}

// FuzzOpen feeds arbitrary bytes to a receiver with the secret, as a bus anyone can publish
// on would: Open and OpenStored never panic, and accept only what the sender sealed, byte for
// byte (the seeds); altered copies of those (which the fuzzer makes from them) are refused.
func FuzzOpen(f *testing.F) {
	c := &clock{time.Unix(1_800_000_000, 0)}
	sealed := map[string]herald.BusMessage{}
	for _, enc := range []bool{false, true} {
		send := newAuth(f, c, "n1", AuthConfig{Encrypt: enc})
		for _, m := range sampleMessages() {
			b := send.Seal(nil, m)
			m.Node = "n1"
			sealed[string(b)] = m
			f.Add(b)
		}
	}
	f.Add([]byte{wireVersionAuth, 0})
	f.Add(AppendMessage(nil, sampleMessages()[0]))
	f.Fuzz(func(t *testing.T, b []byte) {
		want, authentic := sealed[string(b)]
		recv := newAuth(t, c, "n2", AuthConfig{})
		for i, open := range []func([]byte) (herald.BusMessage, error){recv.Open, recv.OpenStored} {
			m, err := open(bytes.Clone(b))
			switch {
			case err == nil && !authentic:
				t.Fatalf("open %d accepted %q, which no node sealed: %+v", i, b, m)
			case err != nil && authentic:
				t.Fatalf("open %d refused a sealed message: %v", i, err)
			case err == nil && fmt.Sprint(m) != fmt.Sprint(want):
				t.Fatalf("open %d: %+v, want %+v", i, m, want)
			case err != nil && !errors.Is(err, ErrForged):
				t.Fatalf("open %d: error %v, want ErrForged", i, err)
			}
		}
	})
}

package broker

import (
	"testing"
	"time"

	"github.com/herald-rt/herald"
)

// TestDeliver: what arrives is decoded, counted and handed on in order; what does not decode
// is counted as dropped; the loop returns once stop is closed.
func TestDeliver(t *testing.T) {
	var c Counters
	in, stop, done := make(chan []byte, 8), make(chan struct{}), make(chan struct{})
	got := make(chan herald.BusMessage)
	go func() {
		defer close(done)
		Deliver(in, stop, func(b []byte) { c.Receive(b, nil, func(m herald.BusMessage) { got <- m }) })
	}()
	var size int
	for i, p := range []string{"a", "bb", "ccc"} {
		enc := AppendMessage(nil, herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "ch", Node: "n", Payload: []byte(p)})
		size += len(enc)
		in <- enc
		if i == 1 {
			in <- []byte{wireVersion, 1, 2} // not a message
		}
	}
	for _, want := range []string{"a", "bb", "ccc"} {
		select {
		case m := <-got:
			if string(m.Payload) != want || m.App != "app" || m.Channel != "ch" || m.Node != "n" {
				t.Fatalf("handed on %+v; want payload %q", m, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%q not handed on", want)
		}
	}
	close(stop)
	<-done
	st := c.Stats()
	if st.MessagesReceived != 3 || st.BytesReceived != uint64(size) || st.Dropped != 1 {
		t.Errorf("stats %+v; want 3 received (%d bytes), 1 dropped", st, size)
	}
	c.CountSent(10)
	c.PublishErrors.Add(2)
	c.Reconnects.Add(3)
	if st := c.Stats(); st.MessagesSent != 1 || st.BytesSent != 10 || st.PublishErrors != 2 || st.Reconnects != 3 {
		t.Errorf("stats %+v", st)
	}
}

// TestReceiveAuth: with an Auth, sealed messages are handed on, unsealed ones counted as
// forged and a second copy as replayed; none of them as dropped.
func TestReceiveAuth(t *testing.T) {
	ck := &clock{time.Unix(1_800_000_000, 0)}
	send, recv := newAuth(t, ck, "n1", AuthConfig{}), newAuth(t, ck, "n2", AuthConfig{})
	var c Counters
	var got []herald.BusMessage
	h := func(m herald.BusMessage) { got = append(got, m) }
	m := herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "ch", Payload: []byte("p")}
	sealed := send.Seal(nil, m)
	c.Receive(append([]byte(nil), sealed...), recv, h)
	c.Receive(append([]byte(nil), sealed...), recv, h)
	c.Receive(AppendMessage(nil, m), recv, h)
	st := c.Stats()
	if len(got) != 1 || string(got[0].Payload) != "p" || got[0].Node != "n1" || st.MessagesReceived != 1 ||
		st.Forged != 1 || st.Replayed != 1 || st.Dropped != 0 {
		t.Fatalf("handed on %+v, stats %+v; want 1 handed on, 1 forged, 1 replayed", got, st)
	}
}

// TestReceiveUnknownVersion: a message of an envelope version this node does not know is
// refused unread and counted apart, with or without an Auth (outside or inside the seal),
// naming its sender when the version follows the rule of versions from 5 on.
func TestReceiveUnknownVersion(t *testing.T) {
	ck := &clock{time.Unix(1_800_000_000, 0)}
	send, recv := newAuth(t, ck, "n1", AuthConfig{}), newAuth(t, ck, "n2", AuthConfig{})
	future := append([]byte{9, 5}, "node7rest of a later version"...)
	// A later version inside a version 4 seal: the body's first byte.
	inner := send.Seal(nil, herald.BusMessage{Kind: herald.BusEvent, App: "a", Channel: "c", Payload: []byte("p")})
	inner[authHead] = 9
	for _, a := range []*Auth{nil, recv} {
		var c Counters
		handed := 0
		c.Receive(append([]byte(nil), future...), a, func(herald.BusMessage) { handed++ })
		st := c.Stats()
		if handed != 0 || st.UnknownVersion != 1 || st.Dropped+st.Forged != 0 ||
			st.LastUnknownVersion != (herald.WireVersionSeen{Node: "node7", Version: 9}) {
			t.Errorf("auth %v: handed %d, stats %+v", a != nil, handed, st)
		}
		if a != nil {
			c.Receive(inner, a, func(herald.BusMessage) { handed++ })
			if st := c.Stats(); handed != 0 || st.UnknownVersion != 2 || st.LastUnknownVersion.Version != 9 || st.Forged != 0 {
				t.Errorf("a later version sealed: handed %d, stats %+v", handed, st)
			}
		}
	}
	if _, err := DecodeMessage([]byte{0}); err == nil {
		t.Error("version 0 decoded")
	}
}

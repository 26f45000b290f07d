package broker

import (
	"strconv"
	"testing"
	"time"

	"github.com/herald-rt/herald"
)

// TestDeliver: what arrives is decoded, counted and handed on in order; what does not decode
// is counted as dropped; the loop returns once stop is closed.
func TestDeliver(t *testing.T) {
	var c Counters
	in, stop, done := make(chan []byte, 8), make(chan struct{}), make(chan struct{})
	got := make(chan herald.BusMessage, 16)
	h := func(m herald.BusMessage) { got <- m }
	go func() {
		defer close(done)
		Deliver(nil, in, stop, func(b []byte) { c.Receive(b, nil, h) }, func() { Drained(h) })
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
			for m.Kind == herald.BusDrained {
				m = <-got
			}
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

// TestDeliverDrains: everything queued when the loop wakes is handed on before one drained
// call; internal keys' messages on ctl are handed on with them; a BusDrained kind received
// from the bus is dropped.
func TestDeliverDrains(t *testing.T) {
	var c Counters
	ctl, in, stop, done := make(chan []byte, 8), make(chan []byte, 64), make(chan struct{}), make(chan struct{})
	var got []string
	batches := make(chan []string, 4)
	h := func(m herald.BusMessage) {
		if m.Kind == herald.BusDrained {
			batches <- got
			got = nil
			return
		}
		got = append(got, string(m.Payload))
	}
	enc := func(p string) []byte {
		return AppendMessage(nil, herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "ch", Node: "n", Payload: []byte(p)})
	}
	for i := range 50 {
		in <- enc(strconv.Itoa(i))
	}
	ctl <- enc("state")
	in <- AppendMessage(nil, herald.BusMessage{Kind: herald.BusDrained, App: "app", Channel: "ch"})
	go func() {
		defer close(done)
		Deliver(ctl, in, stop, func(b []byte) { c.Receive(b, nil, h) }, func() { Drained(h) })
	}()
	select {
	case b := <-batches:
		if len(b) != 51 {
			t.Fatalf("one drain handed on %d messages, want 51: %v", len(b), b)
		}
		n := 0
		for _, p := range b {
			if p == "state" {
				continue
			}
			if p != strconv.Itoa(n) {
				t.Fatalf("out of order: %v", b)
			}
			n++
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no drained call")
	}
	close(stop)
	<-done
	if st := c.Stats(); st.Dropped != 1 || st.MessagesReceived != 51 {
		t.Errorf("stats %+v; want 51 received, 1 dropped (the BusDrained kind from the bus)", st)
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

package ws

import (
	"testing"
	"time"
)

// TestHold: a connection held for a while is not read meanwhile: the messages it sent after
// the one that held it, in the same write and later, are delivered once the hold ends, in
// order; then it is read as before, and a message may hold it again.
func TestHold(t *testing.T) {
	hs := newHarness(t, Config{})
	cl, o := hs.dial()
	var batch []byte
	for _, m := range []string{"hold:300", "a", "b"} {
		batch = append(batch, maskedText(m)...)
	}
	start := time.Now()
	if _, err := cl.Conn.Write(batch); err != nil {
		t.Fatal(err)
	}
	if e := hs.next(o, evMessage); string(e.payload) != "hold:300" {
		t.Fatalf("first message %q", e.payload)
	}
	if err := cl.WriteText("c"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a", "b", "c"} {
		e := hs.next(o, evMessage)
		if string(e.payload) != want {
			t.Fatalf("got %q, want %q", e.payload, want)
		}
		// The hold began after start: nothing after it comes sooner than 300 ms after start
		// (less the engine clock's millisecond).
		if d := time.Since(start); d < 299*time.Millisecond {
			t.Fatalf("%q delivered %v after the write, during its 300 ms hold", want, d)
		}
	}
	// Read as before, and held again.
	start = time.Now()
	if err := cl.WriteText("hold:200"); err != nil {
		t.Fatal(err)
	}
	if err := cl.WriteText("d"); err != nil {
		t.Fatal(err)
	}
	hs.next(o, evMessage)
	if e := hs.next(o, evMessage); string(e.payload) != "d" || time.Since(start) < 199*time.Millisecond {
		t.Fatalf("after a second hold: %q %v after the write", e.payload, time.Since(start))
	}
}

// maskedText is one masked text frame of s (s shorter than 126 bytes).
func maskedText(s string) []byte {
	return append([]byte{0x81, 0x80 | byte(len(s)), 0, 0, 0, 0}, s...)
}

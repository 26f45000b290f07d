package httpapi

import (
	"testing"
	"time"

	"github.com/herald-rt/herald"
)

// TestReplayCacheWindow checks how long a signature is remembered (at least two windows:
// a timestamp may be a window ahead of the clock and stays valid a window after it), that
// memory is returned as generations expire, and that a full cache refuses (fails closed).
func TestReplayCacheWindow(t *testing.T) {
	const w = time.Minute
	t0 := time.Unix(1_000_000, 0)
	c := newReplayCache(w, 3)
	k := keyOf("app", "sig")
	if err := c.check(k, t0); err != nil {
		t.Fatalf("first use: %v", err)
	}
	for _, at := range []time.Duration{0, w, 2*w - time.Second} {
		if err := c.check(k, t0.Add(at)); herald.CodeOf(err) != herald.CodeUnauthorized {
			t.Fatalf("replay %v after first use: %v, want refused", at, err)
		}
	}
	if keyOf("other-app", "sig") == k {
		t.Fatal("the same signature for another app has the same key")
	}
	if err := c.check(k, t0.Add(3*w+time.Second)); err != nil {
		t.Fatalf("three windows later (the timestamp check refuses it by then): %v", err)
	}
	if c.size != 1 {
		t.Fatalf("size %d after the old generations expired, want 1", c.size)
	}
	now := t0.Add(3*w + 2*time.Second)
	for _, s := range []string{"a", "b"} {
		if err := c.check(keyOf("app", s), now); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.check(keyOf("app", "c"), now); herald.CodeOf(err) != herald.CodeBusy {
		t.Fatalf("over the limit: %v, want 503", err)
	}
	c.forget(keyOf("app", "b"))
	if err := c.check(keyOf("app", "b"), now); err != nil {
		t.Fatalf("a forgotten signature: %v", err)
	}
	if err := c.check(keyOf("app", "d"), now.Add(10*w)); err != nil || c.size != 1 {
		t.Fatalf("after a long idle: %v, size %d, want everything expired", err, c.size)
	}
}

package broker

import (
	"context"
	"errors"
	"testing"

	"github.com/herald-rt/herald"
)

func TestRound(t *testing.T) {
	stop := make(chan struct{})
	r := NewRound()
	failed := errors.New("pong lost")
	go r.End(failed)
	if err := r.Wait(context.Background(), stop, "flush"); err != failed {
		t.Errorf("Wait = %v, want End's error", err)
	}
	close(stop) // a round that has ended reports its result even after the broker closed
	if err := r.Wait(context.Background(), stop, "flush"); err != failed {
		t.Errorf("Wait after stop = %v, want End's error", err)
	}

	r = NewRound()
	if err := r.Wait(context.Background(), stop, "flush"); herald.CodeOf(err) != herald.CodeUnavailable {
		t.Errorf("Wait on a round that will not be made = %v, want CodeUnavailable", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Wait(ctx, make(chan struct{}), "flush"); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with ctx done = %v, want context.Canceled", err)
	}
}

package historytest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/poll"
)

// prompt bounds one Publish or Read while the bus is down.
const prompt = 5 * time.Second

// testDown: while the bus server is down (or, for an engine without one, once the node's
// broker is closed) Publish returns an error with code CodeUnavailable, promptly and without
// a panic, and so does Read where the history lives on that server; once the server is back,
// publishing works again.
func testDown(t *testing.T, nc NewCluster) {
	c := start(t, nc, 2)
	publish(t, c.Histories[0], rule, event("app", "down", "m1"))
	if c.Stop != nil {
		c.Stop(t)
		poll.Until(t, Wait, "both brokers to report the bus down", func() (bool, string) {
			return !c.Brokers[0].Connected() && !c.Brokers[1].Connected(),
				fmt.Sprintf("connected: node0 %v, node1 %v", c.Brokers[0].Connected(), c.Brokers[1].Connected())
		})
	} else {
		ctx, cancel := ctxWait()
		defer cancel()
		if err := c.Brokers[0].Close(ctx); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), prompt)
	defer cancel()
	t0 := time.Now()
	_, err := c.Histories[0].Publish(ctx, rule, event("app", "down", "m2"))
	if herald.CodeOf(err) != herald.CodeUnavailable || time.Since(t0) >= prompt {
		t.Errorf("Publish with the bus down returned %v after %v; want a CodeUnavailable error within %v", err, time.Since(t0), prompt)
	}
	if c.Stop == nil {
		return
	}
	t0 = time.Now()
	if _, err := c.Histories[1].Read(ctx, rule, "app", "down", 0, 10); herald.CodeOf(err) != herald.CodeUnavailable {
		t.Errorf("Read with the bus down returned %v after %v; want a CodeUnavailable error", err, time.Since(t0))
	}
	c.Start(t)
	poll.NoError(t, Wait, "a publish to succeed once the bus is back", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), prompt)
		defer cancel()
		_, err := c.Histories[0].Publish(ctx, rule, event("app", "down", "m3"))
		return err
	})
}

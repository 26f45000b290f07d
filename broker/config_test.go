package broker

import (
	"strings"
	"testing"
	"time"
)

func TestCommonDefaults(t *testing.T) {
	c := Common{NodeID: "n1", Timeout: time.Minute}.WithDefaults()
	if c.Prefix != "herald" || c.QueueSize != DefaultQueueSize || c.Timeout != time.Minute || c.ReconnectWait != 100*time.Millisecond ||
		c.ReconnectMaxWait != time.Second || c.ProbeInterval != 5*time.Second || c.Logger == nil || c.NodeID != "n1" {
		t.Errorf("defaults: %+v", c)
	}
	if err := c.Check("nats", "nats://127.0.0.1:4222"); err != nil {
		t.Errorf("Check: %v", err)
	}
	for _, tc := range []struct {
		url  string
		c    Common
		want string
	}{
		{"", c, "nats broker: URL and NodeID are required"},
		{"nats://x", Common{Prefix: "p"}, "nats broker: URL and NodeID are required"},
		{"nats://x", Common{NodeID: "n", Prefix: "a..b"}, `nats broker: prefix "a..b"`},
		{"nats://x", Common{NodeID: "n", Prefix: "a*"}, `nats broker: prefix "a*"`},
	} {
		if err := tc.c.Check("nats", tc.url); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Check(%q, %+v) = %v; want %s...", tc.url, tc.c, err, tc.want)
		}
	}
	if d := c.Reconnect(1); d < 90*time.Millisecond || d > 110*time.Millisecond {
		t.Errorf("Reconnect(1) = %v, want ReconnectWait ± 10%%", d)
	}
	if d := c.Reconnect(100); d < 900*time.Millisecond || d > 1100*time.Millisecond {
		t.Errorf("Reconnect(100) = %v, want ReconnectMaxWait ± 10%%", d)
	}
}

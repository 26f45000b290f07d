package config

import "testing"

// TestSubscriptionCountSwitch: enable_subscription_count_event reaches the app herald runs,
// off by default.
func TestSubscriptionCountSwitch(t *testing.T) {
	file := writeFile(t, "h.yaml", "apps:\n  - {id: a, key: a, secret: s, enable_subscription_count_event: true}\n  - {id: b, key: b, secret: s}\n")
	c, err := load(t, []string{"--config", file}, nil)
	if err != nil {
		t.Fatal(err)
	}
	apps := c.HeraldApps()
	if !apps[0].EnableSubscriptionCountEvent || apps[1].EnableSubscriptionCountEvent {
		t.Errorf("enable_subscription_count_event: app a %v, app b %v; want true, false",
			apps[0].EnableSubscriptionCountEvent, apps[1].EnableSubscriptionCountEvent)
	}
}

package config

import (
	"strings"
	"testing"
)

// TestShutdownConfig: a negative drain delay is refused naming the field and where it came
// from; 0 (close at once) is allowed.
func TestShutdownConfig(t *testing.T) {
	_, err := load(t, []string{"--shutdown-drain-delay", "-1s"}, nil)
	if err == nil || !strings.Contains(err.Error(), "shutdown.drain_delay: -1s must not be negative (from flag --shutdown-drain-delay)") {
		t.Errorf("negative drain delay: %v", err)
	}
	c, err := load(t, nil, map[string]string{"HERALD_SHUTDOWN_DRAIN_DELAY": "0"})
	if err != nil || c.Shutdown.DrainDelay.Duration != 0 {
		t.Errorf("drain delay 0: %+v, %v", c.Shutdown, err)
	}
}

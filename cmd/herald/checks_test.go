package main

import (
	"testing"
	"time"

	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/nats"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/config"
)

// TestConfigSharesRuntimeValues: the values the configuration keeps of its own
// (config.MinSecretBytes and the others) are the runtime packages'.
func TestConfigSharesRuntimeValues(t *testing.T) {
	for _, c := range []struct {
		name          string
		config, owner any
	}{
		{"MinSecretBytes", config.MinSecretBytes, broker.MinSecretBytes},
		{"DefaultClockSkew", time.Duration(config.DefaultClockSkew), broker.DefaultMaxSkew},
		{"NATSPingInterval", time.Duration(config.NATSPingInterval), nats.PingInterval},
		{"NATSPingsOutstanding", config.NATSPingsOutstanding, nats.MaxPingsOutstanding},
		{"MaxHistoryReplicas", config.MaxHistoryReplicas, nats.MaxHistoryReplicas},
		{"DefaultMaxKeys", config.DefaultMaxKeys, cluster.DefaultMaxKeys},
	} {
		if c.config != c.owner {
			t.Errorf("%s = %v, the runtime's is %v", c.name, c.config, c.owner)
		}
	}
}

package main

import (
	"reflect"
	"testing"
	"time"

	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/nats"
	"github.com/herald-rt/herald/cluster"
)

// TestConfigSharesRuntimeValues: the values configuration keeps of its own (config_checks.go)
// are the runtime packages'.
func TestConfigSharesRuntimeValues(t *testing.T) {
	for _, c := range []struct {
		name          string
		config, owner any
	}{
		{"minSecretBytes", minSecretBytes, broker.MinSecretBytes},
		{"defaultClockSkew", time.Duration(defaultClockSkew), broker.DefaultMaxSkew},
		{"natsPingInterval", time.Duration(natsPingInterval), nats.PingInterval},
		{"natsPingsOutstanding", natsPingsOutstanding, nats.MaxPingsOutstanding},
		{"maxHistoryReplicas", maxHistoryReplicas, nats.MaxHistoryReplicas},
		{"defaultMaxKeys", defaultMaxKeys, cluster.DefaultMaxKeys},
	} {
		if c.config != c.owner {
			t.Errorf("%s = %v, the runtime's is %v", c.name, c.config, c.owner)
		}
	}
}

// TestRuntimeChecksComplete: runtimeChecks hands in every check validation calls.
func TestRuntimeChecksComplete(t *testing.T) {
	v := reflect.ValueOf(runtimeChecks())
	for i := range v.NumField() {
		if v.Field(i).IsNil() {
			t.Errorf("runtimeChecks leaves %s nil", v.Type().Field(i).Name)
		}
	}
}

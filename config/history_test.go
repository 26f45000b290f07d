package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald"
)

// The example of docs/configuration.md (History).
const historyYAML = `
apps:
  - id: app-id
    key: app-key
    secret: app-secret
    history:
      - channels: "auction-*"
        size: 1000
        ttl: 10m
      - {channels: "presence-room-*", size: 50, ttl: 30s}
history:
  max_bytes_per_app: 1048576
`

func TestLoadConfigHistory(t *testing.T) {
	c, err := load(t, []string{"--config", writeFile(t, "c.yaml", historyYAML)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []herald.HistoryRule{{Channels: "auction-*", Size: 1000, TTL: 10 * time.Minute}, {Channels: "presence-room-*", Size: 50, TTL: 30 * time.Second}}
	if got := c.HeraldApps()[0].History; !reflect.DeepEqual(got, want) {
		t.Fatalf("rules %+v, want %+v", got, want)
	}
	if c.History.MaxBytesPerApp != 1<<20 {
		t.Fatalf("history.max_bytes_per_app %d", c.History.MaxBytesPerApp)
	}
}

func TestLoadConfigHistoryErrors(t *testing.T) {
	for _, tc := range []struct{ rule, want string }{
		{`{size: 10, ttl: 1m}`, "apps[0].history[0].channels: must name the channels"},
		{`{channels: "a b*", size: 10, ttl: 1m}`, `apps[0].history[0].channels: "a b*" holds a character no channel name has`},
		{`{channels: "private-encrypted-*", size: 10, ttl: 1m}`, "encrypted channels keep no history"},
		{`{channels: "a-*", size: 0, ttl: 1m}`, "apps[0].history[0].size: 0 must be from 1 to 100000"},
		{`{channels: "a-*", size: 10}`, "apps[0].history[0].ttl: 0s must be more than 0"},
		{`{channels: "a-*", size: 10, ttl: 1m, sise: 3}`, "apps[0].history[0].sise"},
	} {
		yaml := "apps:\n  - {id: i, key: k, secret: s, history: [" + tc.rule + "]}\n"
		_, err := load(t, []string{"--config", writeFile(t, "c.yaml", yaml)}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", tc.rule, err, tc.want)
		}
	}
}

// TestLoadConfigHistoryReplicas: history.replicas is from 0 to 5, and only for a NATS bus.
func TestLoadConfigHistoryReplicas(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		want  string // "": accepted
	}{
		{[]string{"--history-replicas", "3", "--cluster-url", "nats://a:4222,nats://b:4222,nats://c:4222", "--cluster-insecure"}, ""},
		{[]string{"--history-replicas", "0"}, ""},
		{[]string{"--history-replicas", "6", "--cluster-url", "nats://a:4222"}, "history.replicas: 6 must be from 0"},
		{[]string{"--history-replicas", "-1", "--cluster-url", "nats://a:4222"}, "history.replicas: -1 must be from 0"},
		{[]string{"--history-replicas", "3", "--cluster-url", "redis://a:6379/0"}, "history.replicas: applies to a NATS cluster bus"},
		{[]string{"--history-replicas", "3"}, "history.replicas: applies to a NATS cluster bus"},
	} {
		c, err := load(t, tc.flags, nil)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.flags, err)
		case tc.want == "" && fmt.Sprint(c.History.Replicas) != tc.flags[1]:
			t.Errorf("%v: history.replicas %d", tc.flags, c.History.Replicas)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: got %v, want an error with %q", tc.flags, err, tc.want)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald/config"
	"github.com/herald-rt/herald/internal/busurl"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/servicetest"
	"github.com/herald-rt/herald/metrics"
)

func TestParseBusURL(t *testing.T) {
	for _, c := range []struct {
		raw, engine, redacted string
		secrets               []string
	}{
		{"nats://127.0.0.1:4222", "nats", "nats://127.0.0.1:4222", nil},
		{"NATS://bus", "nats", "nats://bus", nil},
		{"nats://herald:s3cret@bus:4222", "nats", "nats://herald:xxxxx@bus:4222", []string{"s3cret"}},
		{"nats://t0ken@a:4222, nats://b:4222", "nats", "nats://xxxxx@a:4222,nats://b:4222", []string{"t0ken"}},
		{"redis://127.0.0.1:6379/0", "redis", "redis://127.0.0.1:6379/0", nil},
		{"redis://:p%40ss@bus:6379/2", "redis", "redis://:xxxxx@bus:6379/2", []string{"p%40ss", "p@ss"}},
		{"rediss://herald:pw@redis.example:6380", "redis", "rediss://herald:xxxxx@redis.example:6380", []string{"pw"}},
		{"redis://herald@bus", "redis", "redis://herald@bus", nil},
	} {
		u, err := busurl.Parse(c.raw)
		if err != nil {
			t.Errorf("%s: %v", c.raw, err)
			continue
		}
		if u.Engine != c.engine || u.Redacted != c.redacted {
			t.Errorf("%s: engine %q, redacted %q; want %q, %q", c.raw, u.Engine, u.Redacted, c.engine, c.redacted)
		}
		for _, s := range c.secrets {
			if !slices.Contains(u.Secrets, s) {
				t.Errorf("%s: secrets %q lack %q", c.raw, u.Secrets, s)
			}
		}
		if len(c.secrets) == 0 && len(u.Secrets) != 0 {
			t.Errorf("%s: secrets %q, want none", c.raw, u.Secrets)
		}
	}
}

// TestConfigErrorsHideSecrets: a cluster.url refused by validation is described without
// repeating its password.
func TestConfigErrorsHideSecrets(t *testing.T) {
	for _, raw := range []string{
		"nats://u:s3cret@bus:port",
		"nats://s3cret@bus:4222,redis://b",
		"redis://:s3cret@bus:6379/zero",
		"redis://:s3cret@bus:6379/0/1",
		"http://u:s3cret@bus",
		"redis://:s3cret@bus:6379/%zz",
	} {
		_, err := load(t, []string{"--cluster-url", raw}, nil)
		if err == nil {
			t.Errorf("%s: accepted", raw)
			continue
		}
		if !strings.Contains(err.Error(), "cluster.url: ") {
			t.Errorf("%s: error %q does not name cluster.url", raw, err)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: error shows the password: %v", raw, err)
		}
	}
}

func TestNewNodeID(t *testing.T) {
	a, b := newNodeID(), newNodeID()
	if a == b {
		t.Fatalf("two generated node ids are both %q", a)
	}
	for _, id := range []string{a, b} {
		if _, err := load(t, []string{"--cluster-node-id", id}, nil); err != nil {
			t.Errorf("generated node id %q is not valid: %v", id, err)
		}
	}
}

// TestRedactLogger: the engines' logger shows no secret, wherever the engine puts it.
func TestRedactLogger(t *testing.T) {
	var buf bytes.Buffer
	raw := "nats://herald:s3cret@bus:4222"
	log := redactLogger(slog.New(slog.NewJSONHandler(&buf, nil)), []string{"s3cret"})
	log.With("bus", "nats", "url", raw).WithGroup("g").Warn("dial "+raw,
		"err", errors.New("connect "+raw+": refused"), slog.Group("inner", "u", raw), "n", 3)
	out := buf.String()
	if strings.Contains(out, "s3cret") {
		t.Fatalf("log shows the secret: %s", out)
	}
	for _, want := range []string{`"url":"nats://herald:xxxxx@bus:4222"`, `"msg":"dial nats://herald:xxxxx@bus:4222"`,
		`"err":"connect nats://herald:xxxxx@bus:4222: refused"`, `"inner":{"u":"nats://herald:xxxxx@bus:4222"}`, `"n":3`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s: %s", want, out)
		}
	}
	if l := slog.Default(); redactLogger(l, nil) != l {
		t.Error("redactLogger wraps a logger with no secret to hide")
	}
}

// TestStartClusterLogsNoSecret starts each engine with a password in its URL (NATS on a
// server that ignores credentials, so that it connects and logs so; Redis on a port where
// nothing listens, so that it logs its failure) and checks that no log line shows it.
func TestStartClusterLogsNoSecret(t *testing.T) {
	ns := servicetest.NATS(t)
	for _, c := range []struct{ name, url, logged string }{
		{"nats", "nats://herald:s3cret-pw@" + ns.Addr(), "cluster bus connected"},
		{"redis", "redis://herald:s3cret-pw@127.0.0.1:" + strconv.Itoa(freePort(t)) + "/0", "cluster bus unreachable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs syncBuffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			bus, err := startCluster(config.ClusterConfig{URL: c.url, NodeID: "n1", Prefix: "herald"}, 0, 0,
				metrics.New("herald_", nil), "herald_", log)
			if err != nil {
				t.Fatal(err)
			}
			poll.NoError(t, 30*time.Second, "the engine to log "+c.logged, func() error {
				if !strings.Contains(logs.String(), c.logged) {
					return errors.New("log so far: " + logs.String())
				}
				return nil
			})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			bus.close(ctx, log)
			if strings.Contains(logs.String(), "s3cret-pw") {
				t.Fatalf("the log shows the password:\n%s", logs.String())
			}
			if attr := fmt.Sprint(bus.startLine(nil)...); strings.Contains(attr, "s3cret-pw") || !strings.Contains(attr, "xxxxx") {
				t.Errorf("start line attribute %s: want the URL redacted", attr)
			}
		})
	}
}

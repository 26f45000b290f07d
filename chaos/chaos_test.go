//go:build linux

package chaos

import (
	"context"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// buildHerald builds herald for the test's runs, without the race detector: the nodes are
// the real binary as users run it.
func buildHerald(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bin, err := BuildHerald(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// service returns the path of a bus server's binary; missing, it fails the test, or skips
// it under -short.
func service(t *testing.T, name string) string {
	t.Helper()
	p, err := lookBinary("", name)
	if err != nil {
		if testing.Short() {
			t.Skipf("%v (-short: skipping; the full suite fails here)", err)
		}
		t.Fatalf("%v (scripts/test.sh installs it)", err)
	}
	return p
}

// TestChaos runs the harness a minute on each setup, a fault every 2 to 5 s (pauses and
// partitions of 1 to 5 s), and fails on any acknowledged event lost, any duplicate, any
// reorder, or a run that could not complete. The Redis run also ingests from Kafka when
// java is installed. Each run logs its report, seed first: a failure is run again with
// `go run ./cmd/herald-chaos --setup ... --seed N --fault-every 2s,5s --pause 1s,5s --partition 1s,5s --duration 1m`.
func TestChaos(t *testing.T) {
	bin := buildHerald(t)
	for _, setup := range []Setup{Single, Redis, NATS} {
		t.Run(string(setup), func(t *testing.T) {
			o := Options{Setup: setup, Duration: time.Minute, Seed: uint64(time.Now().UnixNano()) >> 11,
				FaultEvery: Span{2 * time.Second, 5 * time.Second}, Pause: Span{time.Second, 5 * time.Second},
				Partition: Span{time.Second, 5 * time.Second}, Catchup: 3 * time.Minute,
				PublishTimeout: 2 * time.Second, // a pause of more times out: retried on another node
				Log:            slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))}
			switch setup {
			case Redis:
				o.RedisServer = service(t, "redis-server")
				if _, err := exec.LookPath("java"); err == nil {
					o.Kafka = true
				} else {
					t.Log("no java: the Redis run ingests nothing from Kafka")
				}
			case NATS:
				o.NATSServer = service(t, "nats-server")
			}
			o.Herald = bin
			rep := runChecked(t, o, 8*time.Minute)
			if n := faults(rep); n < 8 {
				t.Errorf("only %d faults injected in a minute at one every 2 to 5 s", n)
			}
			if rep.Totals.Acked < 500 {
				t.Errorf("only %d events acknowledged in a minute", rep.Totals.Acked)
			}
		})
	}
}

// runChecked runs the harness with o within limit, logs its report (seed first), and fails
// the test when the run could not complete or its checker failed it.
func runChecked(t *testing.T, o Options, limit time.Duration) *Report {
	t.Helper()
	t.Logf("seed %d", o.Seed)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	rep, err := Run(ctx, o)
	if err != nil {
		t.Fatalf("seed %d: %v", o.Seed, err)
	}
	var b strings.Builder
	rep.Print(&b)
	t.Log("\n" + b.String())
	if rep.Failed() {
		t.Errorf("seed %d: the run failed (report above)", o.Seed)
	}
	return rep
}

func faults(r *Report) int {
	n := 0
	for _, v := range r.Faults {
		n += v
	}
	return n
}

// testWriter writes the harness's warnings to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

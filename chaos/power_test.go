//go:build linux

package chaos

import (
	"log/slog"
	"testing"
	"time"

	"github.com/herald-rt/herald/chaos/lazyfs"
)

// TestPowerCutAppendfsyncAlways cuts the power of the Redis bus three times in 40 s under
// appendfsync always: every acknowledged event was fsynced before its answer, so none may be
// lost, and the cuts must have taken back nothing Redis had acknowledged. Without FUSE (or
// root) it skips.
func TestPowerCutAppendfsyncAlways(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a run of a minute")
	}
	if err := lazyfs.Available(); err != nil {
		t.Skipf("no power cut here: %v", err)
	}
	o := Options{Setup: Redis, Duration: 40 * time.Second, Seed: uint64(time.Now().UnixNano()) >> 11,
		FaultEvery: Span{8 * time.Second, 12 * time.Second}, Catchup: 2 * time.Minute, PublishTimeout: 2 * time.Second,
		RedisAOF: "always", PowerCut: true, Faults: []Fault{PowerCut, CutClients},
		RedisServer: service(t, "redis-server"), Herald: buildHerald(t),
		Log: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	rep := runChecked(t, o, 5*time.Minute)
	if rep.Faults[PowerCut] < 1 {
		t.Errorf("no power cut in the run: faults %v", rep.Faults)
	}
	if rep.Totals.LostReported != nil || rep.Totals.NotRecovered != nil {
		t.Errorf("with appendfsync always a power cut loses nothing, yet subscribers were told %v", rep.Totals.NotRecovered)
	}
	if rep.Totals.Acked < 200 {
		t.Errorf("only %d events acknowledged", rep.Totals.Acked)
	}
}

package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"testing"
	"time"
)

// childArg makes this test binary a bench child (RunChild on its standard input and output)
// instead of running tests: the parent side of --procs runs the real thing.
const childArg = "herald-bench-child"

func TestMain(m *testing.M) {
	if len(os.Args) == 2 && os.Args[1] == childArg {
		if err := RunChild(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func childTarget(t *testing.T, target Target, procs int) Target {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	target.Procs, target.Child = procs, []string{exe, childArg}
	return target
}

func TestFanoutProcs(t *testing.T) {
	target := childTarget(t, startHerald(t, nil), 2)
	tl := NewTimeline()
	tl.Start()
	target.Timeline = tl
	// The peak of open connections is read by polling the timeline's count, not from its
	// once-a-second points, which a busy machine may sample before the children's relays:
	// events a second apart keep all 51 open (and relayed) for two seconds.
	var peak atomic.Int64
	stop, polled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(polled)
		for {
			peak.Store(max(peak.Load(), tl.conns.Load()))
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	rep, err := Fanout(t.Context(), FanoutConfig{Target: target, Subs: 51, Events: 3, Interval: time.Second, Wait: patience})
	close(stop)
	<-polled
	if err != nil {
		t.Fatal(err)
	}
	tl.Stop()
	// The children relay what their clients record: the parent's timeline saw every
	// connection and every delivery (each child relays before it answers).
	var delivered int64
	pts := tl.Points()
	for _, p := range pts {
		delivered += p.Delivered
	}
	if last := pts[len(pts)-1]; delivered != 153 || peak.Load() != 51 || last.Attempts != 51 || last.Connections != 0 || last.Failed != 0 {
		t.Fatalf("parent timeline: %d delivered, peak %d connections, last point %+v; want 153, 51, and 51 attempts closed", delivered, peak.Load(), last)
	}
	if rep.Setup.Established != 51 || rep.Setup.Requested != 51 || rep.Generator.Procs != 3 {
		t.Fatalf("setup %+v, generator %+v; want 51 over 2 children (3 processes)", rep.Setup, rep.Generator)
	}
	if d := rep.Delivery; d.Expected != 153 || d.Delivered != 153 || !d.Complete || !d.Clean() {
		t.Fatalf("delivery %+v; want 153, merged from both children", d)
	}
	if rep.Latency.Count != 153 || rep.PerEvent[2].Latency.Count != 51 || rep.Latency.MinMs <= 0 {
		t.Fatalf("latency %+v, event 3 %+v; want the merged histograms", rep.Latency, rep.PerEvent[2].Latency)
	}
	if rep.Generator.CPUSeconds <= 0 {
		t.Fatalf("generator %+v; want the children's CPU counted", rep.Generator)
	}
}

func TestMultichannelProcs(t *testing.T) {
	target := childTarget(t, startHerald(t, nil), 2)
	rep, err := Multichannel(t.Context(), MultichannelConfig{Target: target, Subs: 50, Channels: 4, Burst: 2, Rounds: 2, Interval: 50 * time.Millisecond, Wait: patience})
	if err != nil {
		t.Fatal(err)
	}
	if d := rep.Delivery; d.Expected != 200 || d.Delivered != 200 || !d.Clean() || rep.PerRound[1].Latency.Count != 100 {
		t.Fatalf("delivery %+v, rounds %+v; want 50 × 4 events", d, rep.PerRound)
	}
}

// TestIdleProcsBadChild: a child command that exits at once fails the run with a clear error.
func TestIdleProcsBadChild(t *testing.T) {
	target := startHerald(t, nil)
	target.Procs, target.Child = 2, []string{"/bin/false"}
	start := time.Now()
	_, err := Idle(t.Context(), IdleConfig{Target: target, Conns: 10})
	if err == nil || !regexp.MustCompile(`child [01]`).MatchString(err.Error()) {
		t.Fatalf("err = %v; want a child error", err)
	}
	if d := time.Since(start); d > patience {
		t.Fatalf("took %v to fail; want well under the 60s timeout", d)
	}
}

func TestIdleProcs(t *testing.T) {
	target := childTarget(t, startHerald(t, nil), 2)
	rep, err := Idle(t.Context(), IdleConfig{Target: target, Conns: 40, Channels: 3})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Setup.Established != 40 || rep.Lost.Count != 0 || rep.Generator.Procs != 3 || rep.Generator.RSSBytes <= 0 {
		t.Fatalf("setup %+v, lost %+v, generator %+v", rep.Setup, rep.Lost, rep.Generator)
	}
}

// TestProcWrites: a process's write calls are read from /proc and count a write.
func TestProcWrites(t *testing.T) {
	before := self().writes()
	if before < 0 {
		t.Skip("/proc/self/io cannot be read here")
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "w"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for range 3 {
		if _, err := f.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if after := self().writes(); after < before+3 {
		t.Fatalf("write calls %d then %d after 3 writes", before, after)
	}
	if n := procOf(1 << 30).writes(); n != -1 {
		t.Fatalf("a process that does not exist: %d write calls, want -1", n)
	}
}

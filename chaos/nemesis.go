//go:build linux

package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/herald-rt/herald/chaos/lazyfs"
)

// nemesis injects the faults of a schedule into the run's processes and links.
type nemesis struct {
	log   *slog.Logger
	start time.Time // the run's
	nodes []*node
	bus   *bus // nil on a single node
	net   *network
	subs  []*subscriber
	disks []*lazyfs.FS // the bus servers' data directories, with the power cut on
	only  []Fault      // the kinds to inject, when not empty

	// turns holds one token per target (node-i, bus): a fault takes it for as long as it
	// lasts, so that a target takes one fault at a time whatever the timing.
	turns map[string]chan struct{}
}

func newNemesis(log *slog.Logger, start time.Time, nodes []*node, b *bus, nw *network, subs []*subscriber, disks []*lazyfs.FS, only []Fault) *nemesis {
	m := &nemesis{log: log, start: start, nodes: nodes, bus: b, net: nw, subs: subs, disks: disks, only: only, turns: map[string]chan struct{}{}}
	for _, n := range nodes {
		m.turns[n.name] = make(chan struct{}, 1)
	}
	m.turns["bus"] = make(chan struct{}, 1)
	return m
}

// faults lists the faults the run can inject.
func (m *nemesis) faults() []Fault {
	var fs []Fault
	for _, f := range Faults {
		switch {
		case (f == RestartBus || f == KillBus || f == PartitionBus) && m.bus == nil:
		case (f == PartitionBus || f == PartitionClients) && !m.net.isolated:
		case f == PowerCut && len(m.disks) == 0:
		case len(m.only) > 0 && !slices.Contains(m.only, f):
		default:
			fs = append(fs, f)
		}
	}
	return fs
}

// run injects steps, each at its time from now, until they are done or ctx ends; a fault
// under way when ctx ends is ended at once (its node started again, its link set up). It
// returns once every fault has ended.
func (m *nemesis) run(ctx context.Context, steps []Step) {
	t0 := time.Now()
	var wg sync.WaitGroup
	for i := range steps {
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(t0.Add(steps[i].At))):
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() { m.apply(ctx, &steps[i]) })
	}
	wg.Wait()
}

// apply injects one fault and ends it.
func (m *nemesis) apply(ctx context.Context, s *Step) {
	key := "bus"
	switch s.Fault {
	case CutClients:
		key = ""
	case KillNode, PauseNode, PartitionBus, PartitionClients:
		key = m.nodes[s.Target-1].name
	}
	if key != "" {
		turn := m.turns[key]
		select {
		case turn <- struct{}{}:
			defer func() { <-turn }()
		case <-ctx.Done():
			return
		}
	}
	s.Started = time.Since(m.start)
	m.log.Info("fault", "fault", s.Fault, "target", s.Target, "for", s.For, "subscribers", s.Subscribers)
	err := m.inject(ctx, s)
	s.Ended = time.Since(m.start)
	if err != nil {
		s.Err = err.Error()
		m.log.Warn("fault failed", "fault", s.Fault, "target", s.Target, "err", err)
	}
}

// inject does what s says; what it undoes (a start, a SIGCONT, a link up) it does whatever
// ctx says, within its own bounds.
func (m *nemesis) inject(ctx context.Context, s *Step) error {
	undo := context.WithoutCancel(ctx)
	switch s.Fault {
	case KillNode:
		n := m.nodes[s.Target-1]
		n.proc.kill()
		sleep(ctx, s.For)
		return n.start(undo)
	case PauseNode:
		n := m.nodes[s.Target-1]
		if err := n.proc.signal(syscall.SIGSTOP); err != nil {
			return err
		}
		sleep(ctx, s.For)
		return n.proc.signal(syscall.SIGCONT)
	case RestartBus, KillBus:
		srv := m.bus.servers[s.Target-1]
		if s.Fault == KillBus {
			srv.proc.kill()
		} else {
			srv.proc.stop(10 * time.Second)
		}
		sleep(ctx, s.For)
		if err := srv.start(undo); err != nil {
			return err
		}
		return poll(undo, startWait, nil, m.bus.formed, func() string { return "the bus did not form again" })
	case PowerCut:
		lost, err := m.powerCut()
		s.Lost = lost
		m.log.Info("power cut", "lost", lost)
		if err != nil {
			return err
		}
		sleep(ctx, s.For)
		return m.startBus(undo)
	case CutClients:
		var none []string
		for _, i := range s.Subscribers {
			if !m.subs[i-1].cut() {
				none = append(none, fmt.Sprint(i))
			}
		}
		if len(none) > 0 {
			m.log.Info("cut-clients: not connected at the time", "subscribers", strings.Join(none, ","))
		}
		return nil
	case PartitionBus, PartitionClients:
		bus := s.Fault == PartitionBus
		if err := m.net.setLink(s.Target, bus, false); err != nil {
			return err
		}
		sleep(ctx, s.For)
		var err error
		for range 5 { // the link must come back: the run depends on it
			if err = m.net.setLink(s.Target, bus, true); err == nil {
				return nil
			}
			time.Sleep(time.Second) // before trying ip again
		}
		return err
	}
	return fmt.Errorf("unknown fault %q", s.Fault)
}

// sleep waits d, or less when ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

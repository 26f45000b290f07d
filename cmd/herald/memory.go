package main

import (
	"context"
	"log/slog"

	"github.com/herald-rt/herald/config"
	"github.com/herald-rt/herald/guard"
)

// memoryGuard is the memory guard (memory.*): while the process uses more than its share of
// the limit, the server refuses new connections. Off when refuse_above_percent is 0.
type memoryGuard struct {
	cfg guard.MemoryConfig
	on  bool
	log *slog.Logger

	guard *guard.Memory // the one start started, for stop; nil when off
}

func newMemoryGuard(c config.MemoryConfig, log *slog.Logger) *memoryGuard {
	return &memoryGuard{on: c.RefuseAbovePercent > 0, log: log, cfg: guard.MemoryConfig{
		Limit:       uint64(c.LimitBytes),
		RefuseAbove: float64(c.RefuseAbovePercent) / 100,
		AcceptBelow: float64(c.AcceptBelowPercent) / 100,
	}}
}

// start detects the memory limit (unless configured) and samples memory until stop. It gives
// the guard, for the server; nil when off.
func (m *memoryGuard) start() (*guard.Memory, error) {
	if !m.on {
		return nil, nil
	}
	g, err := guard.NewMemory(m.cfg, m.log)
	if err != nil {
		m.log.Error("memory guard", "err", err)
		return nil, err
	}
	g.Start()
	m.guard = g
	return g, nil
}

func (m *memoryGuard) stop(context.Context) error {
	if m.guard != nil {
		m.guard.Close()
	}
	return nil
}

package main

import (
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

// leaving is a node's drain: the first SIGINT or SIGTERM marks it leaving, which /health shows
// as "draining" and /ready as 503, while the node goes on serving and accepting; it closes its
// connections once the drain delay has passed or a second signal came.
type leaving struct {
	sigs chan os.Signal
	on   atomic.Bool
}

// notifyLeaving starts catching SIGINT and SIGTERM; stop gives them back.
func notifyLeaving() *leaving {
	l := &leaving{sigs: make(chan os.Signal, 2)}
	signal.Notify(l.sigs, syscall.SIGINT, syscall.SIGTERM)
	return l
}

func (l *leaving) stop() { signal.Stop(l.sigs) }

// signalled delivers the first signal.
func (l *leaving) signalled() <-chan os.Signal { return l.sigs }

// draining reports whether a signal came: /ready must send new clients elsewhere.
func (l *leaving) draining() bool { return l.on.Load() }

// drain marks the node leaving after sig, then waits delay, or less if another signal comes;
// connections is read for the log.
func (l *leaving) drain(sig os.Signal, delay time.Duration, connections func() int64, log *slog.Logger) {
	l.on.Store(true)
	if delay <= 0 {
		return
	}
	log.Info("draining: /ready answers 503 while the node still serves; closing connections after the drain delay (a second signal closes them now)",
		"signal", sig.String(), "drain_delay", delay, "connections", connections())
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case sig := <-l.sigs:
		log.Info("second signal: ending the drain delay", "signal", sig.String())
	}
}

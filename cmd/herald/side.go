package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"time"

	"github.com/herald-rt/herald/config"
	"github.com/herald-rt/herald/httpapi"
	"github.com/herald-rt/herald/metrics"
)

// sideListeners are the metrics and pprof servers, each on its own listener so that scrapes
// and profiles never compete with clients for the API's port, and pprof stays private. Each
// is an httpapi.Port of its own: a few connections (a scraper, an operator), whole-request
// deadlines, and a slow or idle client evicted for a new one, so that a flood of the public
// port or of these leaves the others answering. The metrics listener also serves the console
// and the detailed /health.
type sideListeners struct {
	metrics config.MetricsConfig
	pprof   config.PprofConfig
	reg     *metrics.Registry
	console http.Handler // nil: no console
	health  http.Handler // the detailed /health; nil: none
	log     *slog.Logger

	servers []*http.Server
	done    []chan struct{}
}

// Connection caps and deadlines of the side listeners. pprof writes a profile for as long as
// it is asked to (profile?seconds=30), so its responses have no write deadline.
var (
	metricsPort = httpapi.PortConfig{Name: "metrics", MaxConns: 16, RequestTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	pprofPort   = httpapi.PortConfig{Name: "pprof", MaxConns: 8, RequestTimeout: 10 * time.Second, WriteTimeout: -1, IdleTimeout: time.Minute}
)

// sideStopWait bounds how long stop waits for the side listeners' requests in progress.
const sideStopWait = 2 * time.Second

// sideConns is how many descriptors the side listeners' connections may hold.
func sideConns(cfg config.Config) int {
	n := 0
	if cfg.Metrics.Enabled {
		n += metricsPort.MaxConns
	}
	if cfg.Pprof.Addr != "" {
		n += pprofPort.MaxConns
	}
	return n
}

// newSideListeners configures the metrics listener (unless disabled), serving reg and, when
// console is not nil, the console; and the pprof listener (only when configured).
func newSideListeners(cfg config.Config, reg *metrics.Registry, console, health http.Handler, log *slog.Logger) *sideListeners {
	return &sideListeners{metrics: cfg.Metrics, pprof: cfg.Pprof, reg: reg, console: console, health: health, log: log}
}

// start opens the listeners and serves them, logging where each listens.
func (s *sideListeners) start() error {
	if err := s.listen(); err != nil {
		s.log.Error("listen", "err", err)
		return err
	}
	return nil
}

func (s *sideListeners) listen() error {
	if s.metrics.Enabled {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", s.reg.Handler())
		if s.health != nil {
			mux.Handle("GET /health", s.health)
		}
		if s.console != nil {
			mux.Handle("/console", s.console)
			mux.Handle("/console/", s.console)
		}
		addr := net.JoinHostPort(s.metrics.Host, strconv.Itoa(s.metrics.Port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("metrics listener %s: %w (set metrics.port, or metrics.enabled false)", addr, err)
		}
		s.serve(ln, metricsPort, mux)
		s.log.Info("metrics listening", "url", "http://"+ln.Addr().String()+"/metrics")
		if s.console != nil {
			s.log.Info("console listening", "url", "http://"+ln.Addr().String()+"/console/login")
		}
	}
	if s.pprof.Addr != "" {
		ln, err := net.Listen("tcp", s.pprof.Addr)
		if err != nil {
			ctx, cancel := context.WithTimeout(context.Background(), sideStopWait)
			defer cancel()
			_ = s.stop(ctx)
			return fmt.Errorf("pprof listener %s: %w", s.pprof.Addr, err)
		}
		runtime.SetMutexProfileFraction(s.pprof.MutexFraction)
		runtime.SetBlockProfileRate(s.pprof.BlockRate)
		s.serve(ln, pprofPort, metrics.PprofHandler())
		s.log.Warn("pprof listening: keep it private", "url", "http://"+ln.Addr().String()+"/debug/pprof/",
			"mutex_fraction", s.pprof.MutexFraction, "block_rate", s.pprof.BlockRate)
	}
	return nil
}

func (s *sideListeners) serve(ln net.Listener, cfg httpapi.PortConfig, h http.Handler) {
	port := httpapi.NewPort(ln, cfg, s.log)
	srv := port.Server(h)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(port)
	}()
	s.servers = append(s.servers, srv)
	s.done = append(s.done, done)
}

// stop closes the listeners and waits for their goroutines, and for their requests in
// progress for at most sideStopWait within ctx.
func (s *sideListeners) stop(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, sideStopWait)
	defer cancel()
	var errs []error
	for i, srv := range s.servers {
		errs = append(errs, srv.Shutdown(ctx))
		<-s.done[i]
	}
	s.servers, s.done = nil, nil
	return errors.Join(errs...)
}

package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"time"

	"github.com/herald-rt/herald/metrics"
)

// sideListeners are the metrics and pprof servers, each on its own listener so that scrapes
// and profiles never compete with clients for the API's port, and pprof stays private.
type sideListeners struct {
	servers []*http.Server
	done    []chan struct{}
}

// startSideListeners opens the metrics listener (unless disabled) and the pprof listener
// (only when configured), logging where each listens.
func startSideListeners(cfg Config, reg *metrics.Registry, log *slog.Logger) (*sideListeners, error) {
	s := &sideListeners{}
	if cfg.Metrics.Enabled {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", reg.Handler())
		addr := net.JoinHostPort(cfg.Metrics.Host, strconv.Itoa(cfg.Metrics.Port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("metrics listener %s: %w (set metrics.port, or metrics.enabled false)", addr, err)
		}
		s.serve(ln, mux, log)
		log.Info("metrics listening", "url", "http://"+ln.Addr().String()+"/metrics")
	}
	if cfg.Pprof.Addr != "" {
		ln, err := net.Listen("tcp", cfg.Pprof.Addr)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("pprof listener %s: %w", cfg.Pprof.Addr, err)
		}
		runtime.SetMutexProfileFraction(cfg.Pprof.MutexFraction)
		runtime.SetBlockProfileRate(cfg.Pprof.BlockRate)
		s.serve(ln, metrics.PprofHandler(), log)
		log.Warn("pprof listening: keep it private", "url", "http://"+ln.Addr().String()+"/debug/pprof/",
			"mutex_fraction", cfg.Pprof.MutexFraction, "block_rate", cfg.Pprof.BlockRate)
	}
	return s, nil
}

func (s *sideListeners) serve(ln net.Listener, h http.Handler, log *slog.Logger) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	s.servers = append(s.servers, srv)
	s.done = append(s.done, done)
}

// close stops the listeners and waits for their goroutines.
func (s *sideListeners) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for i, srv := range s.servers {
		_ = srv.Shutdown(ctx)
		<-s.done[i]
	}
}

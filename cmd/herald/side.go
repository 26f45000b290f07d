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

	"github.com/herald-rt/herald/console"
	"github.com/herald-rt/herald/httpapi"
	"github.com/herald-rt/herald/metrics"
)

// sideListeners are the metrics and pprof servers, each on its own listener so that scrapes
// and profiles never compete with clients for the API's port, and pprof stays private. Each
// is an httpapi.Port of its own: a few connections (a scraper, an operator), whole-request
// deadlines, and a slow or idle client evicted for a new one, so that a flood of the public
// port or of these leaves the others answering.
type sideListeners struct {
	servers []*http.Server
	done    []chan struct{}
}

// startSideListeners opens the metrics listener (unless disabled) and the pprof listener
// (only when configured), logging where each listens.
// Connection caps and deadlines of the side listeners. pprof writes a profile for as long as
// it is asked to (profile?seconds=30), so its responses have no write deadline.
var (
	metricsPort = httpapi.PortConfig{Name: "metrics", MaxConns: 16, RequestTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	pprofPort   = httpapi.PortConfig{Name: "pprof", MaxConns: 8, RequestTimeout: 10 * time.Second, WriteTimeout: -1, IdleTimeout: time.Minute}
)

// sideConns is how many descriptors the side listeners' connections may hold.
func sideConns(cfg Config) int {
	n := 0
	if cfg.Metrics.Enabled {
		n += metricsPort.MaxConns
	}
	if cfg.Pprof.Addr != "" {
		n += pprofPort.MaxConns
	}
	return n
}

func startSideListeners(cfg Config, reg *metrics.Registry, con *console.Console, log *slog.Logger) (*sideListeners, error) {
	s := &sideListeners{}
	if cfg.Metrics.Enabled {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", reg.Handler())
		if con != nil {
			mux.Handle("/console", con)
			mux.Handle("/console/", con)
		}
		addr := net.JoinHostPort(cfg.Metrics.Host, strconv.Itoa(cfg.Metrics.Port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("metrics listener %s: %w (set metrics.port, or metrics.enabled false)", addr, err)
		}
		s.serve(ln, metricsPort, mux, log)
		log.Info("metrics listening", "url", "http://"+ln.Addr().String()+"/metrics")
		if con != nil {
			log.Info("console listening", "url", "http://"+ln.Addr().String()+"/console?token=...")
		}
	}
	if cfg.Pprof.Addr != "" {
		ln, err := net.Listen("tcp", cfg.Pprof.Addr)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("pprof listener %s: %w", cfg.Pprof.Addr, err)
		}
		runtime.SetMutexProfileFraction(cfg.Pprof.MutexFraction)
		runtime.SetBlockProfileRate(cfg.Pprof.BlockRate)
		s.serve(ln, pprofPort, metrics.PprofHandler(), log)
		log.Warn("pprof listening: keep it private", "url", "http://"+ln.Addr().String()+"/debug/pprof/",
			"mutex_fraction", cfg.Pprof.MutexFraction, "block_rate", cfg.Pprof.BlockRate)
	}
	return s, nil
}

func (s *sideListeners) serve(ln net.Listener, cfg httpapi.PortConfig, h http.Handler, log *slog.Logger) {
	port := httpapi.NewPort(ln, cfg, log)
	srv := port.Server(h)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(port)
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

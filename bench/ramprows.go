package bench

import (
	"sync"
	"time"
)

// RampRow is one report interval of a ramp. Attempts, Active and Failed are at its end;
// the rest are over the interval.
type RampRow struct {
	Second          float64 `json:"t"`
	Attempts        int64   `json:"attempts"`
	Active          int64   `json:"active"`
	Failed          int64   `json:"failed"`
	SuccessPercent  float64 `json:"success_percent"` // of the attempts completed in the interval
	ServerCPU       float64 `json:"server_cpu_percent,omitempty"`
	ServerRSSBytes  int64   `json:"server_rss_bytes,omitempty"`
	DeliveredPerSec float64 `json:"delivered_per_sec"` // event frames received
}

// peakAt99 returns the most active connections in the rows before the first whose success
// fell under 99%.
func peakAt99(rows []RampRow) int64 {
	var peak int64
	for _, r := range rows {
		if r.SuccessPercent < 99 {
			break
		}
		peak = max(peak, r.Active)
	}
	return peak
}

// rampSampler turns the pool's counters into report rows.
type rampSampler struct {
	p      *pool
	rec    *recorder
	server meter
	start  time.Time

	mu                      sync.Mutex
	at                      time.Time
	established, failed, fr int64
	cpu                     time.Duration
}

func newRampSampler(p *pool, rec *recorder, server meter, start time.Time) *rampSampler {
	s := &rampSampler{p: p, rec: rec, server: server, start: start, at: start}
	if server != nil {
		s.cpu, _ = server.cpu()
	}
	s.fr = rec.frames.Load()
	return s
}

func (s *rampSampler) sample() RampRow {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	est, failed, frames := s.p.established.Load(), s.p.failed.Load(), s.rec.frames.Load()
	row := RampRow{Second: now.Sub(s.start).Seconds(), Attempts: s.p.attempts.Load(), Active: s.p.active.Load(), Failed: failed, SuccessPercent: 100}
	if done := (est - s.established) + (failed - s.failed); done > 0 {
		row.SuccessPercent = float64(est-s.established) * 100 / float64(done)
	}
	dt := now.Sub(s.at).Seconds()
	if dt > 0 {
		row.DeliveredPerSec = float64(frames-s.fr) / dt
	}
	if s.server != nil {
		if cpu, err := s.server.cpu(); err == nil && dt > 0 {
			row.ServerCPU = (cpu - s.cpu).Seconds() * 100 / dt
			s.cpu = cpu
		}
		row.ServerRSSBytes, _ = s.server.rss()
	}
	s.at, s.established, s.failed, s.fr = now, est, failed, frames
	return row
}

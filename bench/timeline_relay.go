package bench

// Children of a --procs run (child.go) hold the connections, so the parent's Timeline would
// see nothing: each child records into a Timeline of its own that it never samples, and
// relays what it recorded to the parent four times a second; the parent adds it to its own.

// progress is what a child recorded since its previous relay, with its running totals.
type progress struct {
	Connections int64      `json:"connections"` // open now
	Attempts    int64      `json:"attempts"`    // so far
	Failed      int64      `json:"failed"`      // so far
	Delivered   int64      `json:"delivered"`   // since the previous relay
	Latency     [][2]int64 `json:"latency"`     // since the previous relay: [µs, count] per non-empty bucket
}

// drain takes what t recorded since the previous drain. It is for timelines that are never
// started: sampling would take the same histogram.
func (t *Timeline) drain() progress {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := progress{Connections: t.conns.Load(), Attempts: t.attempts.Load(), Failed: t.failed.Load(), Delivered: t.delivered}
	if t.delivered > 0 {
		for _, b := range t.cur.h.Distribution() {
			if b.Count > 0 {
				p.Latency = append(p.Latency, [2]int64{b.From, b.Count})
			}
		}
	}
	t.cur.h.Reset()
	t.delivered = 0
	return p
}

// relayState is the last progress absorbed from one child: its totals turn into deltas.
type relayState struct{ conns, attempts, failed int64 }

// absorb adds a child's progress to t.
func (t *Timeline) absorb(last *relayState, p progress) {
	t.conns.Add(p.Connections - last.conns)
	t.attempts.Add(p.Attempts - last.attempts)
	t.failed.Add(p.Failed - last.failed)
	*last = relayState{p.Connections, p.Attempts, p.Failed}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range p.Latency {
		_ = t.cur.h.RecordValues(max(b[0], 1), b[1])
	}
	t.delivered += p.Delivered
}

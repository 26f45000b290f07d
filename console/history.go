package console

import "time"

// historyLen is how many points each node's ring keeps: 15 minutes at the default
// interval of 1s (fewer minutes at a shorter interval). The rings are the whole memory of
// the charts: historyLen points per node, whatever the traffic.
const historyLen = 900

// point is one node's figures at one moment, as the charts draw them.
type point struct {
	TimeMS      int64   `json:"t"`
	Connections int64   `json:"connections"`
	InPerSec    float64 `json:"in_per_s"`
	OutPerSec   float64 `json:"out_per_s"`
	RefusedPerS float64 `json:"refused_per_s"`
}

// ring is one node's last historyLen points, oldest first once full.
type ring struct {
	pts     []point
	next    int   // where the next point goes, once full
	refused int64 // the node's refusals ever, at the last point
	full    bool
}

// add appends st's point; the refusal rate is taken against the previous point's total.
func (r *ring) add(st *nodeStats) point {
	p := point{TimeMS: st.TimeMS}
	var refused int64
	for _, a := range st.Apps {
		p.Connections += a.Connections
		p.InPerSec += a.InPerSec
		p.OutPerSec += a.OutPerSec
	}
	for _, n := range st.Refused {
		refused += n
	}
	if len(r.pts) > 0 {
		last := r.last()
		if secs := float64(p.TimeMS-last.TimeMS) / 1000; secs > 0 && refused >= r.refused {
			p.RefusedPerS = float64(refused-r.refused) / secs
		}
	}
	r.refused = refused
	if !r.full {
		r.pts = append(r.pts, p)
		r.full = len(r.pts) == historyLen
		return p
	}
	r.pts[r.next] = p
	r.next = (r.next + 1) % historyLen
	return p
}

func (r *ring) last() point {
	if r.full {
		return r.pts[(r.next+historyLen-1)%historyLen]
	}
	return r.pts[len(r.pts)-1]
}

// since returns the points newer than from (ms), oldest first.
func (r *ring) since(from int64) []point {
	var out []point
	n := len(r.pts)
	for i := 0; i < n; i++ {
		p := r.pts[(r.next+i)%n]
		if !r.full {
			p = r.pts[i]
		}
		if p.TimeMS > from {
			out = append(out, p)
		}
	}
	return out
}

// record adds a node's figures to its ring (under c.mu).
func (c *Console) recordLocked(node string, st *nodeStats) {
	r := c.hist[node]
	if r == nil {
		r = &ring{}
		c.hist[node] = r
	}
	r.add(st)
}

// history returns every node's points of the last 15 minutes, by node ("" for this node
// when it has no id).
func (c *Console) history() map[string][]point {
	from := time.Now().Add(-15 * time.Minute).UnixMilli()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string][]point, len(c.hist))
	for node, r := range c.hist {
		out[node] = r.since(from)
	}
	return out
}

// pointsAfter returns, by node, the points newer than after[node] (ms; a node not in after:
// its points of the last 15 minutes), oldest first, and moves after[node] to the newest
// returned. A page's stream keeps after: each overview carries every point since the last one,
// so that none is skipped when the overviews and the samples do not keep step (a refusal, a
// burst, lives in one point).
func (c *Console) pointsAfter(after map[string]int64) map[string][]point {
	from := time.Now().Add(-15 * time.Minute).UnixMilli()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string][]point, len(c.hist))
	for node, r := range c.hist {
		since, ok := after[node]
		if !ok {
			since = from
		}
		if pts := r.since(since); len(pts) > 0 {
			out[node] = pts
			after[node] = pts[len(pts)-1].TimeMS
		}
	}
	return out
}

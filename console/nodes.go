package console

import (
	"encoding/json"
	"sort"
	"time"

	"github.com/herald-rt/herald"
)

// BusKind is the kind of the console's bus messages: a node's figures (connections, rates,
// refusals) for the other nodes' consoles, once a second from each node that runs one, on an
// internal key the consoles have interest in; the payload is their JSON. Its value, 32,
// stands apart from the cluster layer's kinds (herald.BusEvent and the others) and is on the wire
// between nodes: it does not change.
const BusKind herald.BusKind = 32

// busChannel is the internal bus key the consoles of a cluster share (an empty app id is
// never an app's).
const busChannel = "console"

// nodeStats is one node's figures, as the page and the other nodes' consoles receive them.
type nodeStats struct {
	Node    string           `json:"node"`
	TimeMS  int64            `json:"time_ms"`
	Apps    []appStats       `json:"apps"`
	Refused map[string]int64 `json:"refused"`
}

// appStats is one app's figures on one node: current values, rates over the last interval.
type appStats struct {
	ID            string  `json:"id"`
	Connections   int64   `json:"connections"`
	Channels      int64   `json:"channels"`
	Subscriptions int64   `json:"subscriptions"`
	NewPerSec     float64 `json:"new_per_s"`
	InPerSec      float64 `json:"in_per_s"`
	OutPerSec     float64 `json:"out_per_s"`
	SlowConsumers int64   `json:"slow_consumers"` // ever, on this node
}

// remote is another node's last figures and when they came.
type remote struct {
	stats nodeStats
	seen  time.Time
}

// prevSample is the sampler's last sample, which rates are taken against.
type prevSample struct {
	at time.Time
	s  Sample
}

// run samples the node every interval, shares the figures on the bus and forgets nodes
// that went silent, until Close.
func (c *Console) run() {
	defer close(c.done)
	defer c.peers.join(c.ctx, c.receive)()
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	prev := &prevSample{at: time.Now(), s: c.cfg.Source.Sample()}
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		prev = c.sample(prev)
		c.share()
		c.expire(time.Now())
	}
}

// sample takes the node's figures and publishes them to the streams; with prev nil (at
// start) the rates are zero.
func (c *Console) sample(prev *prevSample) *prevSample {
	now := time.Now()
	s := c.cfg.Source.Sample()
	st := &nodeStats{Node: c.cfg.Node, TimeMS: now.UnixMilli(), Refused: s.Refused, Apps: make([]appStats, len(s.Apps))}
	var before map[string]AppSample
	var secs float64
	if prev != nil {
		before = make(map[string]AppSample, len(prev.s.Apps))
		for _, a := range prev.s.Apps {
			before[a.ID] = a
		}
		secs = now.Sub(prev.at).Seconds()
	}
	rate := func(now, then int64) float64 {
		if secs <= 0 || now < then {
			return 0
		}
		return float64(now-then) / secs
	}
	for i, a := range s.Apps {
		b, ok := before[a.ID]
		if !ok {
			b = a
		}
		st.Apps[i] = appStats{ID: a.ID, Connections: a.Connections, Channels: a.Channels, Subscriptions: a.Subscriptions,
			NewPerSec: rate(a.NewConnections, b.NewConnections), InPerSec: rate(a.MessagesIn, b.MessagesIn),
			OutPerSec: rate(a.MessagesOut, b.MessagesOut), SlowConsumers: a.SlowConsumers}
	}
	c.latest.Store(st)
	if prev != nil { // the first sample has no rates
		c.mu.Lock()
		c.recordLocked(st.Node, st)
		c.mu.Unlock()
	}
	return &prevSample{at: now, s: s}
}

// share sends this node's figures to the other nodes' consoles.
func (c *Console) share() { c.peers.share(c.ctx, c.cfg.Interval, c.latest.Load()) }

// receive takes another node's figures from the bus (Config.Route hands it every BusKind
// message). Malformed ones and this node's own are ignored.
func (c *Console) receive(msg herald.BusMessage) {
	if msg.Kind != BusKind || msg.Node == c.cfg.Node {
		return
	}
	var st nodeStats
	if err := json.Unmarshal(msg.Payload, &st); err != nil {
		return
	}
	st.Node = msg.Node // who sent it, whatever the payload says
	c.mu.Lock()
	c.nodes[msg.Node] = &remote{stats: st, seen: time.Now()}
	c.recordLocked(msg.Node, &st)
	c.mu.Unlock()
}

// expire forgets nodes not heard from for five intervals: they stopped, or stopped
// running a console.
func (c *Console) expire(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, r := range c.nodes {
		if now.Sub(r.seen) > 5*c.cfg.Interval {
			delete(c.nodes, id)
			delete(c.hist, id)
		}
	}
}

// allNodes returns this node's figures first, then the others' by node id.
func (c *Console) allNodes() []nodeStats {
	out := []nodeStats{*c.latest.Load()}
	c.mu.Lock()
	for _, r := range c.nodes {
		out = append(out, r.stats)
	}
	c.mu.Unlock()
	sort.Slice(out[1:], func(i, j int) bool { return out[1+i].Node < out[1+j].Node })
	return out
}

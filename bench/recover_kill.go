package bench

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"
)

// KillReport is a recover run's node death (RecoverConfig.Kill).
type KillReport struct {
	Node    int `json:"node"`    // the node killed, 0-based in --ws order
	Clients int `json:"clients"` // its clients, whose connections ended
	// GoneSeconds is from the kill until every one of its clients saw its connection end;
	// AllSeconds from the kill until the last of them recovered (0 unless every one did).
	GoneSeconds float64 `json:"gone_seconds"`
	AllSeconds  float64 `json:"all_seconds"`
}

// checkKill checks the settings of a node's death: a cluster, a node in it, publishes to
// another one, and no --switch-nodes.
func (c RecoverConfig) checkKill() error {
	nodes, err := c.wsNodes()
	if err != nil {
		return nil // reported by Target.check
	}
	switch {
	case len(nodes) < 2:
		return errors.New("--kill-pid: needs a cluster of two --ws nodes at least, the clients of the killed one reconnecting to the others")
	case c.KillNode < 0 || c.KillNode >= len(nodes):
		return fmt.Errorf("--kill-node %d: the nodes are 0 to %d, in --ws order", c.KillNode, len(nodes)-1)
	case c.SwitchNodes:
		return errors.New("--kill-pid and --switch-nodes: the killed node's clients go to the live nodes, the others stay")
	}
	ws, errWS := url.Parse(nodes[c.KillNode])
	rest, errREST := url.Parse(c.REST)
	if errWS == nil && errREST == nil && ws.Host == rest.Host {
		return fmt.Errorf("--rest %s: names the node --kill-node %d kills; publish through a live one", c.REST, c.KillNode)
	}
	return nil
}

// liveRoute sends reconnect i to the (i mod L)-th of the L nodes other than KillNode.
func (c RecoverConfig) liveRoute(i, nodes int) int {
	k := i % (nodes - 1)
	if k >= c.KillNode {
		k++
	}
	return k
}

// liveProcs are the server processes to measure after the kill: without the killed node's
// when there is one pid per node.
func (c RecoverConfig) liveProcs() serverProcs {
	s := c.serverProcs()
	if c.Kill == nil || len(s.nodes) == 0 || c.KillNode >= len(s.pids) {
		return s
	}
	s.pids = append(append([]int(nil), s.pids[:c.KillNode]...), s.pids[c.KillNode+1:]...)
	s.nodes = append(append([]string(nil), s.nodes[:c.KillNode]...), s.nodes[c.KillNode+1:]...)
	return s
}

// kill ends node cfg.KillNode and waits until every one of its clients saw its connection
// end; it returns their indices. The clients of the other nodes stay, and are not expected
// to recover.
func (r *recoverRun) kill(cfg RecoverConfig, p *pool, rep *RecoverReport) ([]int, error) {
	p.mu.Lock()
	clients := p.clients
	p.mu.Unlock()
	var dropped []*client
	var indices []int
	for _, c := range clients {
		if int(c.node) != cfg.KillNode {
			s := &r.subs[c.index]
			s.mu.Lock()
			s.stay = true
			s.mu.Unlock()
			rep.Stayed++
			continue
		}
		c.mu.Lock()
		c.closing = true // its end is the kill, not a loss
		c.mu.Unlock()
		dropped = append(dropped, c)
		indices = append(indices, int(c.index))
	}
	rep.Kill = &KillReport{Node: cfg.KillNode, Clients: len(dropped)}
	r.killedAt = time.Now()
	if err := cfg.Kill(); err != nil {
		return nil, fmt.Errorf("kill node %d: %w", cfg.KillNode, err)
	}
	deadline := r.killedAt.Add(cfg.Wait)
	for {
		open := 0
		for _, c := range dropped {
			c.mu.Lock()
			if !c.gone {
				open++
			}
			c.mu.Unlock()
		}
		if open == 0 {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("kill node %d: %d of its %d clients still connected %v after the kill", cfg.KillNode, open, len(dropped), cfg.Wait)
		}
		time.Sleep(10 * time.Millisecond)
	}
	rep.Kill.GoneSeconds = time.Since(r.killedAt).Seconds()
	return indices, nil
}

// dialAs is dial for the reconnect of the killed node's clients: attempt j brings back
// client clients[j].
func (r *recoverRun) dialAs(p *pool, clients []int) dialFunc {
	dial := r.dial(p, true)
	return func(ctx context.Context, ep endpoint, node, j int, deadline time.Time) error {
		return dial(ctx, ep, node, clients[j], deadline)
	}
}

package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"time"
)

// PresenceConfig configures the presence scenario. The zero value of each field means its
// default; Target.Rate and Target.Concurrency pace the joins (each a connection and its join).
type PresenceConfig struct {
	Target
	Clients    int // members in all, each on its own connection; default 3000
	PerChannel int // members per channel; default 100 (Pusher's limit)
	// Wait is how long, after the last join, every member has to see every other; default 10s.
	Wait time.Duration
	// NoRESTCheck skips asking every node's REST API for the channels' user counts with every
	// member joined, and for no channel once they have left.
	NoRESTCheck bool
	// Settle is how long each REST check may take to hold; default 10s.
	Settle time.Duration
}

func (c PresenceConfig) withDefaults() PresenceConfig {
	c.Target = c.Target.withDefaults()
	c.Clients = or(c.Clients, 3000)
	c.PerChannel = or(c.PerChannel, 100)
	c.Wait = or(c.Wait, 10*time.Second)
	c.Settle = or(c.Settle, 10*time.Second)
	return c
}

func (c PresenceConfig) check() error {
	errs := []error{c.Target.check()}
	if _, err := c.restNodes(); err != nil && !c.NoRESTCheck {
		errs = append(errs, err)
	}
	if c.Procs > 1 {
		errs = append(errs, errors.New("--procs: presence runs in one process"))
	}
	if c.Clients < 0 || c.PerChannel < 0 {
		errs = append(errs, errors.New("--clients and --per-channel must be positive"))
	}
	if c.Wait < 0 || c.Settle < 0 {
		errs = append(errs, errors.New("--wait and --settle must not be negative"))
	}
	return errors.Join(errs...)
}

// presencePrefix starts the name of every channel presence joins.
const presencePrefix = "presence-bench-"

// PresenceReport is the result of Presence.
type PresenceReport struct {
	Scenario   string     `json:"scenario"` // "presence"
	Server     ServerInfo `json:"server"`
	Clients    int        `json:"clients"`
	PerChannel int        `json:"per_channel"`
	Channels   int        `json:"channels"`
	Setup      Setup      `json:"setup"` // each connection and its join
	// Joined is how many joins succeeded; JoinsPerSec is Joined over JoinSeconds, from the
	// first attempt to the last subscription_succeeded.
	Joined      int       `json:"joined"`
	JoinSeconds float64   `json:"join_seconds"`
	JoinsPerSec float64   `json:"joins_per_sec"`
	JoinLatency Latency   `json:"join_latency"` // subscribe sent → subscription_succeeded
	Snapshots   Snapshots `json:"snapshots"`
	Members     Members   `json:"members"`
	Lost        Lost      `json:"lost"`
	// Counts asks every node, with every member joined, for each channel's user count;
	// AfterLeave asks for none once every client has closed. Nil with NoRESTCheck.
	Counts       *RESTCheck `json:"rest_counts,omitempty"`
	LeaveSeconds float64    `json:"leave_seconds"` // closing every client
	AfterLeave   *RESTCheck `json:"rest_after_leave,omitempty"`
	// ServerUsage and Generator are CPU time from the first attempt until every member had
	// seen every other (or the wait ended): connections, joins and member_added fan-out.
	ServerUsage           *Usage  `json:"server_usage,omitempty"`
	ServerCPUPerJoinUs    float64 `json:"server_cpu_per_join_us,omitempty"`
	Generator             Usage   `json:"generator"`
	GeneratorCPUPerJoinUs float64 `json:"generator_cpu_per_join_us,omitempty"`
	Timeline              []Point `json:"timeline,omitempty"`
}

// Clean reports whether every client joined, nothing was lost, every snapshot was consistent,
// every member saw every other exactly once and every REST check held.
func (r *PresenceReport) Clean() bool {
	return r.Setup.Failed == 0 && r.Lost.Count == 0 && r.Snapshots.Inconsistent == 0 && r.Members.Clean() &&
		r.Members.Complete && (r.Counts == nil || r.Counts.OK) && (r.AfterLeave == nil || r.AfterLeave.OK)
}

// Presence connects cfg.Clients clients, client i to node i mod N, each joining presence
// channel "presence-bench-<i / PerChannel>" as user "u<i>" with a subscription it signs
// itself. It measures the joins, waits until every member has seen every other member of its
// channel, checks that each saw each exactly once and, unless cfg.NoRESTCheck, that every
// node reports each channel's user count; then every client leaves and every node should
// report no channel.
func Presence(ctx context.Context, cfg PresenceConfig) (rep *PresenceReport, err error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	m := newMembers(cfg.Clients, cfg.PerChannel, cfg.Key, cfg.Secret)
	rep = &PresenceReport{Scenario: "presence", Server: cfg.info(false), Clients: cfg.Clients,
		PerChannel: cfg.PerChannel, Channels: len(m.names)}
	defer func() { rep.Timeline = timelinePoints(cfg.Timeline) }()
	rec := newRecorder(nil, 0, cfg.Timeline)
	rec.other = m.observe
	p, err := newPool(rec, cfg.Timeline)
	if err != nil {
		return nil, err
	}
	defer p.close(cfg.Timeout)
	pub, err := newPublisher(cfg.Target, 0, 1)
	if err != nil {
		return nil, err
	}
	defer pub.close()

	serverCPU := cfg.serverProcs().startCPU()
	genCPU := self().startCPU()
	joined := make([]bool, cfg.Clients) // client i's element is written by its dial only
	start := time.Now()
	rep.Setup, err = connectWith(ctx, cfg.Target, p, 0, cfg.Clients, func(ctx context.Context, ep endpoint, node, i int, deadline time.Time) error {
		c := &client{rec: rec, shard: int32(i % latencyShards), node: int32(node), index: int32(i)}
		err := p.open(ctx, ep, c, deadline, func(nc net.Conn) ([]byte, error) { return m.join(c, nc, ep) })
		joined[i] = err == nil
		return err
	})
	if err != nil {
		return rep, err
	}
	m.mu.Lock()
	rep.Joined, rep.JoinLatency, rep.Snapshots = rep.Setup.Established, m.latency.summary(), m.snapshots
	last := m.lastJoin
	m.mu.Unlock()
	rep.JoinSeconds = last.Sub(start).Seconds()
	if rep.JoinSeconds > 0 {
		rep.JoinsPerSec = float64(rep.Joined) / rep.JoinSeconds
	}
	if rep.Snapshots.MinMembers < 0 {
		rep.Snapshots.MinMembers = 0
	}

	counts := m.joinedCounts(joined)
	for !m.converged(joined, counts) && time.Since(last) < cfg.Wait {
		if err := sleepUntil(ctx, time.Now().Add(10*time.Millisecond)); err != nil {
			return rep, err
		}
	}
	rep.Members.Complete = m.converged(joined, counts)
	rep.Members.Seconds = time.Since(last).Seconds()
	if serverCPU != nil {
		if rep.ServerUsage, err = serverCPU.stop(); err != nil {
			return rep, err
		}
		rep.ServerCPUPerJoinUs = rep.ServerUsage.CPUSeconds * 1e6 / float64(max(rep.Joined, 1))
	}
	if u, err := genCPU.stop(); err == nil {
		rep.Generator = u
		rep.GeneratorCPUPerJoinUs = u.CPUSeconds * 1e6 / float64(max(rep.Joined, 1))
	}

	var nodes []string
	if !cfg.NoRESTCheck {
		nodes, _ = cfg.restNodes() // check made them
		q := url.Values{"filter_by_prefix": {presencePrefix}, "info": {"user_count"}}
		check := pollChannels(ctx, pub, cfg.Target, nodes, q, cfg.Settle, func(list map[string]channelInfo) string {
			return wrongUserCounts(list, m.names, counts)
		})
		rep.Counts = &check
	}
	rep.Members = m.countAt(joined, rep.Members)
	rep.Lost = p.lostSoFar()
	m.leaving.Store(true)
	leave := time.Now()
	err = p.close(cfg.Timeout)
	rep.LeaveSeconds = time.Since(leave).Seconds()
	if err != nil {
		return rep, err
	}
	if !cfg.NoRESTCheck {
		check := pollChannels(ctx, pub, cfg.Target, nodes, url.Values{"filter_by_prefix": {presencePrefix}}, cfg.Settle, func(list map[string]channelInfo) string {
			if len(list) > 0 {
				return fmt.Sprintf("%d channels still listed", len(list))
			}
			return ""
		})
		rep.AfterLeave = &check
	}
	return rep, nil
}

// countAt is count, keeping the convergence figures of d.
func (m *members) countAt(joined []bool, d Members) Members {
	n := m.count(joined)
	n.Complete, n.Seconds = d.Complete, d.Seconds
	return n
}

// wrongUserCounts says how list differs from channel k of names having counts[k] users (none
// listed when 0), or returns "".
func wrongUserCounts(list map[string]channelInfo, names []string, counts []int) string {
	want := 0
	for k, name := range names {
		if counts[k] == 0 {
			continue
		}
		want++
		ch, ok := list[name]
		switch {
		case !ok:
			return fmt.Sprintf("%s not listed (%d channels listed, %d wanted)", name, len(list), want)
		case ch.UserCount == nil:
			return name + " without a user_count"
		case *ch.UserCount != counts[k]:
			return fmt.Sprintf("%s has user_count %d; %d joined", name, *ch.UserCount, counts[k])
		}
	}
	if len(list) != want {
		return fmt.Sprintf("%d channels listed; %d joined", len(list), want)
	}
	return ""
}

// WriteText writes the report as a readable block.
func (r *PresenceReport) WriteText(w io.Writer) error {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "presence: %d members in %d channels of %d (%q...), %s\n",
		r.Clients, r.Channels, r.PerChannel, presencePrefix+"0", r.Server.on())
	writeSetup(b, r.Setup)
	fmt.Fprintf(b, "  joins        %d joined in %.2f s = %.0f joins/s (first attempt to last subscription_succeeded)\n",
		r.Joined, r.JoinSeconds, r.JoinsPerSec)
	s := r.Snapshots
	fmt.Fprintf(b, "  snapshots    %d subscription_succeeded listing %d to %d members; %d inconsistent\n",
		s.Received, s.MinMembers, s.MaxMembers, s.Inconsistent)
	if s.FirstProblem != "" {
		fmt.Fprintf(b, "               first: %s\n", s.FirstProblem)
	}
	d := r.Members
	pct := 0.0
	if d.Expected > 0 {
		pct = float64(d.Seen) * 100 / float64(d.Expected)
	}
	fmt.Fprintf(b, "  members      %d of %d seen (%.2f%%): missing %d, duplicated %d, unexpected %d, removed while nobody left %d",
		d.Seen, d.Expected, pct, d.Missing, d.Duplicated, d.Unexpected, d.Removed)
	if d.Complete {
		fmt.Fprintf(b, "; every member saw every other %.3f s after the last join\n", d.Seconds)
	} else {
		fmt.Fprintf(b, "; incomplete after waiting %.1f s\n", d.Seconds)
	}
	writeLost(b, r.Lost, "members")
	fmt.Fprintf(b, "  latency ms   %8s %7s %7s %7s %7s %7s %7s\n", "count", "min", "p50", "p95", "p99", "p99.9", "max")
	writeLatency(b, "join", r.JoinLatency, "")
	writeRESTCheck(b, "user counts", "every channel listed with its user count", r.Counts)
	fmt.Fprintf(b, "  leave        %d closed in %.2f s\n", r.Joined, r.LeaveSeconds)
	writeRESTCheck(b, "after leave", "no channel listed", r.AfterLeave)
	writeCPU(b, r.ServerUsage, r.Generator, "from the first join until every member saw every other",
		"join", r.ServerCPUPerJoinUs, r.GeneratorCPUPerJoinUs)
	return b.Flush()
}

// writeCPU writes the server's and the generator's CPU over window, and each per unit.
func writeCPU(b io.Writer, server *Usage, gen Usage, window, unit string, serverPer, genPer float64) {
	if u := server; u != nil {
		fmt.Fprintf(b, "  server CPU   %.2f s %s = %.1f us per %s; RSS %s%s\n",
			u.CPUSeconds, window, serverPer, unit, mib(u.RSSBytes), u.summedNote())
		writeProcs(b, u)
	} else {
		fmt.Fprintf(b, "  server CPU   not measured (no --server-pid)\n")
	}
	fmt.Fprintf(b, "  generator    CPU %.2f s over the same window = %.1f us per %s; RSS %s\n", gen.CPUSeconds, genPer, unit, mib(gen.RSSBytes))
}

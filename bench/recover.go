package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"time"
)

// RecoverConfig configures the recover scenario. The zero value of each field means its
// default.
type RecoverConfig struct {
	Target
	Clients  int // default 1000
	Channels int // history channels, client i on channel i mod Channels; default 1
	// Channel is the channel's name or, with several, their names' stem: Channel-0,
	// Channel-1, ... The server must keep history for them. Default "recover".
	Channel string
	Outage  time.Duration // how long every client stays away; default 10s
	Events  int           // events published to every channel during the outage; default 100
	Before  int           // events published to every channel before the outage; 0 none
	After   int           // events published to every channel once every client settled; 0 none
	// LiveInterval, when set, also publishes a live event to every channel this often while
	// the clients reconnect, until every one has settled: they are replayed to the clients
	// that resubscribe after them and reach the others live.
	LiveInterval time.Duration
	PayloadBytes int // default 100
	// Wait bounds every wait: for the first positions, the deliveries before the outage and
	// after it, and for every client to settle once the reconnect started; default 30s.
	Wait time.Duration
	// ReconnectConcurrency is how many reconnects are in flight at once; 0 means every client
	// at once. The reconnect ignores Target.Rate.
	ReconnectConcurrency int
	// SwitchNodes reconnects client i to node i+1 mod N of a cluster instead of node i mod N,
	// so that every client recovers from a node it was not on.
	SwitchNodes bool
	// Kill, when set, makes the outage a node's death instead of every connection dropping:
	// Kill ends node KillNode of the cluster (herald-bench: SIGKILL to --kill-pid) once the
	// clients are positioned, its clients see their connections end, the events are published
	// while they are away, and they alone reconnect, the j-th of them to the (j mod L)-th of
	// the L live nodes (a balancer's round robin over its live backends, or DNS round robin
	// whose client skips the dead address). The other nodes' clients stay, and must get every
	// event live. REST must name a live node.
	Kill     func() error
	KillNode int // the node Kill ends, an index into the WS nodes
}

func (c RecoverConfig) withDefaults() RecoverConfig {
	c.Target = c.Target.withDefaults()
	c.Clients = or(c.Clients, 1000)
	c.Channels = or(c.Channels, 1)
	c.Channel = or(c.Channel, "recover")
	c.Outage = or(c.Outage, 10*time.Second)
	c.Events = or(c.Events, 100)
	c.PayloadBytes = or(c.PayloadBytes, 100)
	c.Wait = or(c.Wait, 30*time.Second)
	return c
}

func (c RecoverConfig) check() error {
	errs := []error{c.Target.check()}
	if _, _, err := c.eventsURL(); err != nil {
		errs = append(errs, err)
	}
	if c.Procs > 1 {
		errs = append(errs, errors.New("--procs: recover runs in one process"))
	}
	if c.Clients < 0 || c.Channels < 0 || c.Clients < c.Channels || c.Events < 0 || c.Before < 0 || c.After < 0 || c.PayloadBytes < 0 {
		errs = append(errs, errors.New("--clients, --channels, --events, --before, --after and --payload must be positive, --clients at least --channels"))
	}
	if c.Before+c.Events+c.After > 1<<20 {
		errs = append(errs, errors.New("--before + --events + --after must be at most 1048576"))
	}
	if c.LiveInterval > 0 && c.Channels > maxChannelsPerTrigger {
		errs = append(errs, errors.New("--live-interval: at most 100 channels"))
	}
	if c.Kill != nil {
		errs = append(errs, c.checkKill())
	}
	if c.Outage < 0 || c.Wait < 0 || c.LiveInterval < 0 || c.ReconnectConcurrency < 0 {
		errs = append(errs, errors.New("--outage, --wait, --live-interval and --reconnect-concurrency must not be negative"))
	}
	return errors.Join(errs...)
}

// names returns the run's channels.
func (c RecoverConfig) names() []string {
	if c.Channels == 1 {
		return []string{c.Channel}
	}
	names := make([]string, c.Channels)
	for i := range names {
		names[i] = c.Channel + "-" + strconv.Itoa(i)
	}
	return names
}

// RecoverReport is the result of Recover.
type RecoverReport struct {
	Scenario            string     `json:"scenario"` // "recover"
	Server              ServerInfo `json:"server"`
	Clients             int        `json:"clients"`
	Channels            int        `json:"channels"`
	Channel             string     `json:"channel"`
	OutageSeconds       float64    `json:"outage_seconds"` // as configured
	Events              int        `json:"events"`         // published to every channel during the outage
	Before              int        `json:"before"`
	After               int        `json:"after"`
	LiveIntervalSeconds float64    `json:"live_interval_seconds,omitempty"`
	PayloadBytes        int        `json:"payload_bytes"`
	SwitchNodes         bool       `json:"switch_nodes,omitempty"`
	Setup               Setup      `json:"setup"` // the first connections
	// Positioned counts the clients that learnt their position (pusher_internal:recovery)
	// after their first subscribe.
	Positioned int64 `json:"positioned"`
	Outage     struct {
		Seconds   float64 `json:"seconds"`   // from the drop to the reconnect
		Published int     `json:"published"` // events per channel
		Failed    int     `json:"failed"`    // of them, publishes that failed
	} `json:"outage"`
	Reconnect Setup `json:"reconnect"` // every client dialling again at once
	// Kill is the node's death, with Kill; Stayed counts the clients of the other nodes, who
	// stayed connected (the recovery counts are the killed node's clients').
	Kill     *KillReport    `json:"kill,omitempty"`
	Stayed   int            `json:"stayed,omitempty"`
	Recovery RecoveryCounts `json:"recovery"`
	// Latency is each recovered client's time from the start of its reconnect (its dial) to
	// its recovery frame; LatencyFromStart from the start of the reconnect phase.
	Latency          Latency `json:"latency"`
	LatencyFromStart Latency `json:"latency_from_start"`
	LivePublished    int     `json:"live_published,omitempty"` // events per channel while reconnecting
	// Delivery counts every event of the run on every client, both connections together;
	// its WaitSeconds is from the last publish of the After events to their delivery.
	Delivery Delivery `json:"delivery"`
	Lost     Lost     `json:"lost"` // connections the server dropped
	// ServerUsage and Generator are CPU time from the start of the reconnect until every
	// client settled (or the wait ended); CPUPerDeliveryMicros is per replayed event.
	ServerUsage *Usage  `json:"server_usage,omitempty"`
	Generator   Usage   `json:"generator"`
	Timeline    []Point `json:"timeline,omitempty"`
}

// RecoveryCounts is how the clients' recoveries went.
type RecoveryCounts struct {
	Recovered int            `json:"recovered"` // recovered:true, every missed event once, in order
	Failed    int            `json:"failed"`
	ByReason  map[string]int `json:"by_reason,omitempty"`
	// AllSeconds is the time from the start of the reconnect to the last recovery frame when
	// every client recovered (0 otherwise); SettledSeconds until every client recovered or
	// failed, or the wait ended.
	AllSeconds     float64 `json:"all_seconds"`
	SettledSeconds float64 `json:"settled_seconds"`
	Complete       bool    `json:"complete"` // every client settled within the wait
	Replayed       int64   `json:"replayed"` // events between a resubscription and its recovery frame
	// PositionErrors counts position frames and events whose offsets did not follow (an
	// event without its position, an offset that skipped or went back, another epoch, an
	// offset - seq that differed between clients), on either connection; LateEvents the
	// events published during the outage that reached a client after its recovery frame.
	PositionErrors int64 `json:"position_errors"`
	LateEvents     int64 `json:"late_events"`
}

// Clean reports whether every client recovered and nothing was lost, duplicated or out of
// order.
func (r *RecoverReport) Clean() bool {
	return r.Setup.Failed == 0 && r.Reconnect.Failed == 0 && r.Recovery.Failed == 0 && r.Recovery.Recovered == r.Clients-r.Stayed &&
		r.Recovery.PositionErrors == 0 && r.Recovery.LateEvents == 0 && r.Lost.Count == 0 && r.Outage.Failed == 0 && r.Delivery.Clean()
}

// Recover subscribes cfg.Clients clients to history channels, each remembering the position
// of the last event it got; publishes cfg.Before events; drops every connection at once (no
// close frame) and publishes cfg.Events events through the REST API over cfg.Outage; then
// reconnects every client at once, each resubscribing with recover from its position, and
// measures how long until every one got recovered:true after every missed event, once and in
// order. cfg.After live events then check that the live events follow on.
func Recover(ctx context.Context, cfg RecoverConfig) (rep *RecoverReport, err error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	names := cfg.names()
	rep = &RecoverReport{Scenario: "recover", Server: cfg.info(true), Clients: cfg.Clients, Channels: cfg.Channels,
		Channel: cfg.Channel, OutageSeconds: cfg.Outage.Seconds(), Events: cfg.Events, Before: cfg.Before, After: cfg.After,
		LiveIntervalSeconds: cfg.LiveInterval.Seconds(), PayloadBytes: cfg.PayloadBytes, SwitchNodes: cfg.SwitchNodes}
	defer func() { rep.Timeline = timelinePoints(cfg.Timeline) }()
	pub, err := newPublisher(cfg.Target, cfg.PayloadBytes, 2)
	if err != nil {
		return nil, err
	}
	defer pub.close()
	r := newRecoverRun(names, cfg.Clients, cfg.Timeline)
	seq := newSequence(len(names))

	first, err := newPool(r.rec, cfg.Timeline)
	if err != nil {
		return nil, err
	}
	defer first.close(cfg.Timeout)
	rep.Setup, err = connectWith(ctx, cfg.Target, first, 0, cfg.Clients, r.dial(first, false))
	if err != nil {
		return rep, err
	}
	r.positioned.expect(int64(rep.Setup.Established))
	r.positioned.await(ctx, cfg.Wait)
	if rep.Positioned = r.positioned.n.Load(); rep.Positioned == 0 {
		return rep, fmt.Errorf("no client got pusher_internal:recovery after subscribing to %s within %v: the server keeps no history for it (herald: a rule in apps[].history)", names[0], cfg.Wait)
	}
	if cfg.Before > 0 {
		for range cfg.Before {
			if err := r.publish(ctx, pub, seq); err != nil {
				return rep, err
			}
		}
		r.rec.expect(first.active.Load() * int64(cfg.Before))
		r.rec.await(ctx, cfg.Wait)
	}

	// The outage: every connection dropped at once, or a node killed, and events published
	// while they are away.
	var dropped []int
	if cfg.Kill != nil {
		if dropped, err = r.kill(cfg, first, rep); err != nil {
			return rep, err
		}
	} else {
		r.drop(first)
		if err := first.close(cfg.Timeout); err != nil {
			return rep, err
		}
		rep.Lost = first.lostSoFar()
	}
	if err := r.outage(ctx, cfg, pub, seq, rep); err != nil {
		return rep, err
	}

	// The reconnect.
	again, err := newPool(r.rec, cfg.Timeline)
	if err != nil {
		return rep, err
	}
	defer again.close(cfg.Timeout)
	t := cfg.Target
	t.Rate, t.Concurrency = 0, or(cfg.ReconnectConcurrency, cfg.Clients)
	shift := 0
	if cfg.SwitchNodes {
		shift = 1
	}
	r.settled.expect(int64(cfg.Clients - rep.Stayed))
	serverCPU := cfg.liveProcs().startCPU()
	genCPU := self().startCPU()
	r.start = time.Now()
	stopLive, live := r.publishLive(ctx, cfg, pub, seq)
	if cfg.Kill != nil {
		rep.Reconnect, err = connectRouted(ctx, t, again, len(dropped), cfg.liveRoute, r.dialAs(again, dropped))
	} else {
		rep.Reconnect, err = connectWith(ctx, t, again, shift, cfg.Clients, r.dial(again, true))
	}
	if err != nil {
		close(stopLive)
		<-live
		return rep, err
	}
	rep.Recovery.Complete = r.settled.await(ctx, max(cfg.Wait-time.Since(r.start), 0))
	rep.Recovery.SettledSeconds = time.Since(r.start).Seconds()
	if serverCPU != nil {
		if u, err := serverCPU.stop(); err == nil {
			rep.ServerUsage = u
		}
	}
	if u, err := genCPU.stop(); err == nil {
		rep.Generator = u
	}
	close(stopLive)
	if err := <-live; err != nil {
		return rep, err
	}
	rep.LivePublished = int(seq.last(0)) - r.outageLast
	for i := range r.subs {
		s := &r.subs[i]
		s.mu.Lock()
		if !s.settled && !s.stay {
			r.settleLocked(s, reasonOf(s))
		}
		s.mu.Unlock()
	}

	// The live events go on from the recovery.
	if cfg.After > 0 {
		r.afterFrom.Store(int64(seq.last(0)))
		for range cfg.After {
			if err := r.publish(ctx, pub, seq); err != nil {
				return rep, err
			}
		}
		last := time.Now()
		r.after.expect((first.active.Load() + again.active.Load()) * int64(cfg.After))
		r.after.await(ctx, cfg.Wait)
		rep.Delivery.WaitSeconds = time.Since(last).Seconds()
	}
	lost := again.lostSoFar()
	rep.Lost.merge(lost)
	if cfg.Kill != nil {
		rep.Lost.merge(first.lostSoFar()) // the clients that stayed
	}
	if err := again.close(cfg.Timeout); err != nil {
		return rep, err
	}
	if cfg.Kill != nil {
		if err := first.close(cfg.Timeout); err != nil {
			return rep, err
		}
	}
	r.report(rep, seq)
	return rep, checkDelivered(rep.Delivery)
}

// dial sets up client i: on its first connection a plain subscribe, on the reconnect (again)
// one that recovers from its position.
func (r *recoverRun) dial(p *pool, again bool) dialFunc {
	return func(ctx context.Context, ep endpoint, node, i int, deadline time.Time) error {
		s := &r.subs[i]
		c := &client{rec: r.rec, chans: r.chans[i], tracks: s.tracks, shard: int32(i % latencyShards), node: int32(node), index: int32(i)}
		if again {
			s.mu.Lock()
			s.stage, s.dialAt, s.conn, s.hasNext = stageRecovering, time.Now().UnixNano(), c, false
			known := s.known
			s.mu.Unlock()
			if !known {
				r.fail(s, "no position before the outage")
				return errNoPosition
			}
		}
		err := p.open(ctx, ep, c, deadline, func(nc net.Conn) ([]byte, error) { return c.setup(nc, ep) })
		if err != nil && again {
			r.fail(s, "reconnect failed")
		}
		return err
	}
}

// publish publishes the next event to every channel; a failure ends the run.
func (r *recoverRun) publish(ctx context.Context, pub *publisher, seq *sequence) error {
	n := 0
	for ch := range r.names {
		n = seq.next(ch)
	}
	_, err := pub.triggerChunks(ctx, r.names, n, time.Time{})
	return err
}

// drop ends every connection of p at once, without a close frame, as a network outage would.
func (r *recoverRun) drop(p *pool) {
	p.mu.Lock()
	clients := p.clients
	p.mu.Unlock()
	for _, c := range clients {
		c.mu.Lock()
		c.closing = true
		if !c.gone {
			c.conn.Shutdown()
		}
		c.mu.Unlock()
	}
}

// outage publishes cfg.Events events to every channel spread over cfg.Outage, and returns once
// it has passed (or the last publish is answered, when later). Failed publishes are recorded
// and not required of the recovery.
func (r *recoverRun) outage(ctx context.Context, cfg RecoverConfig, pub *publisher, seq *sequence, rep *RecoverReport) error {
	start := time.Now()
	for k := range cfg.Events {
		if err := sleepUntil(ctx, start.Add(time.Duration(k)*cfg.Outage/time.Duration(cfg.Events))); err != nil {
			return err
		}
		n := 0
		for ch := range r.names {
			n = seq.next(ch)
		}
		if _, err := pub.triggerChunks(ctx, r.names, n, time.Time{}); err != nil {
			if ctx.Err() != nil {
				return err
			}
			for ch := range r.names {
				seq.fail(ch, n)
			}
			rep.Outage.Failed++
		}
	}
	if err := sleepUntil(ctx, start.Add(cfg.Outage)); err != nil {
		return err
	}
	rep.Outage.Seconds = time.Since(start).Seconds()
	rep.Outage.Published = cfg.Events
	r.outageLast = int(seq.last(0))
	r.outageFailed = make([]map[int]bool, len(r.names))
	for ch := range r.names {
		r.outageFailed[ch] = map[int]bool{}
		for _, f := range seq.failedOn(ch) {
			r.outageFailed[ch][int(f)] = true
		}
	}
	return nil
}

// publishLive publishes a live event to every channel each cfg.LiveInterval until stop is
// closed (nothing without an interval); done gets its error.
func (r *recoverRun) publishLive(ctx context.Context, cfg RecoverConfig, pub *publisher, seq *sequence) (stop chan struct{}, done chan error) {
	stop, done = make(chan struct{}), make(chan error, 1)
	if cfg.LiveInterval <= 0 {
		done <- nil
		return stop, done
	}
	go func() { done <- publishEvery(ctx, stop, pub, r.names, seq, cfg.LiveInterval) }()
	return stop, done
}

// report fills rep from the clients' state once every connection is closed.
func (r *recoverRun) report(rep *RecoverReport, seq *sequence) {
	rc := &rep.Recovery
	rc.ByReason = map[string]int{}
	for i := range r.subs {
		s := &r.subs[i]
		s.mu.Lock()
		switch s.stage {
		case stageRecovered:
			rc.Recovered++
		case stageFailed:
			rc.Failed++
			rc.ByReason[s.reason]++
		}
		rc.Replayed += int64(s.replayed)
		rc.PositionErrors += int64(s.posErrs)
		rc.LateEvents += int64(s.late)
		ch := int(s.ch)
		rep.Delivery.add(&s.tracks[0], seq.last(ch), seq.failedOn(ch))
		s.mu.Unlock()
	}
	if len(rc.ByReason) == 0 {
		rc.ByReason = nil
	}
	rep.Delivery.finish()
	rep.Delivery.Complete = rep.Delivery.Missing == 0 // WaitSeconds: set by Recover
	r.mu.Lock()
	rep.Latency, rep.LatencyFromStart = r.lat.summary(), r.latStart.summary()
	if rc.Recovered == rep.Clients-rep.Stayed && r.lastDone > 0 {
		rc.AllSeconds = time.Unix(0, r.lastDone).Sub(r.start).Seconds()
		if rep.Kill != nil {
			rep.Kill.AllSeconds = time.Unix(0, r.lastDone).Sub(r.killedAt).Seconds()
		}
	}
	r.mu.Unlock()
	if u := rep.ServerUsage; u != nil && rc.Replayed > 0 {
		u.CPUPerDeliveryMicros = u.CPUSeconds * 1e6 / float64(rc.Replayed)
	}
	if rc.Replayed > 0 {
		rep.Generator.CPUPerDeliveryMicros = rep.Generator.CPUSeconds * 1e6 / float64(rc.Replayed)
	}
}

// reasons returns the failure reasons, most frequent first.
func (rc RecoveryCounts) reasons() []string {
	rs := slices.Collect(maps.Keys(rc.ByReason))
	slices.SortFunc(rs, func(a, b string) int {
		if d := rc.ByReason[b] - rc.ByReason[a]; d != 0 {
			return d
		}
		if a < b {
			return -1
		}
		return 1
	})
	return rs
}

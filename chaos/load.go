//go:build linux

package chaos

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// warmUp starts the subscribers and publishes warm-up events on every channel until every
// subscriber has received one on each: from then on each receives every channel's events.
func (r *run) warmUp(ctx context.Context) error {
	subCtx, stop := context.WithCancel(context.Background())
	r.stopSubs = stop
	for _, s := range r.subs {
		r.subsDone.Go(func() { s.run(subCtx) })
	}
	warm := &publisher{id: warmUp, nodes: r.nodes, app: r.app, timeout: r.o.PublishTimeout, start: r.start,
		failures: map[string]int{}, client: probeClient}
	within := 2 * startWait
	deadline := time.Now().Add(within)
	for k := 1; ; k++ {
		var cold []string
		for _, ch := range r.channels() {
			all := true
			for _, s := range r.subs {
				all = all && s.highest(ch, warmUp) > 0
			}
			if all {
				continue
			}
			cold = append(cold, ch)
			if r.kafka != nil && r.kafka.owns(ch) {
				r.kafka.warm(ctx, ch, k)
				continue
			}
			body := fmt.Sprintf(`{"name":"chaos","channel":%q,"data":%q}`, ch, payload{P: warmUp, S: k}.encode())
			_, _ = warm.post(ctx, r.nodes[k%len(r.nodes)], []byte(body), warmUp+"-"+ch+"-"+strconv.Itoa(k))
		}
		if len(cold) == 0 {
			r.o.Log.Info("every subscriber receives every channel")
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("warming up: %s not received by every subscriber within %v", strings.Join(cold, ", "), within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond): // the subscribers' time to receive them
		}
	}
}

// faults runs the publishers and the nemesis for the run's duration, ends every fault, lets
// the publishers finish and the subscribers catch up, and checks what they received.
func (r *run) faults(ctx context.Context) (*Report, error) {
	o := r.o
	publishing, endPublishing := context.WithTimeout(ctx, o.Duration)
	defer endPublishing()
	hard, endHard := context.WithTimeout(ctx, o.Duration+o.Catchup)
	defer endHard()

	chans := r.channels()[:o.Channels]
	for i := 1; i <= o.Publishers; i++ {
		var own []string
		for j := i - 1; j < len(chans); j += o.Publishers {
			own = append(own, chans[j])
		}
		r.pubs = append(r.pubs, newPublisher("p"+strconv.Itoa(i), own, r.nodes, r.app, o, r.start, o.Seed, i))
	}
	var wg sync.WaitGroup
	for _, p := range r.pubs {
		wg.Go(func() { p.run(publishing, hard) })
	}
	if r.kafka != nil {
		wg.Go(func() { r.kafka.run(publishing, hard) })
	}
	m := newNemesis(o.Log, r.start, r.nodes, r.bus, r.net, r.subs, r.disks, o.Faults)
	steps := plan(o.Seed, o, scheduleShape{faults: m.faults(), nodes: len(r.nodes), busServers: r.busServers(), subscribers: len(r.subs)})
	o.Log.Info("faults", "planned", len(steps), "kinds", m.faults())
	m.run(publishing, steps)
	o.Log.Info("faults over")
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	problems := r.settle(hard)
	o.Log.Info("every node and subscriber is back: the last events")
	for _, p := range r.pubs {
		wg.Go(func() { p.finish(hard) })
	}
	if r.kafka != nil {
		wg.Go(func() { r.kafka.finish(hard) })
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	problems = append(problems, r.catchUp(ctx)...)
	rep := r.report(steps)
	rep.Problems = append(rep.Problems, problems...)
	return rep, nil
}

// settle waits, until hard ends, for every node to serve on its bus and every subscriber
// to be subscribed to every channel; it returns what was not.
func (r *run) settle(hard context.Context) []string {
	var problems []string
	for _, n := range r.nodes {
		if n.proc.pid() == 0 {
			problems = append(problems, n.name+" is not running at the end (see the fault errors)")
			continue
		}
		if err := n.waitUp(hard, r.o.Catchup, connected); err != nil {
			problems = append(problems, "after the faults: "+err.Error())
		}
	}
	err := poll(hard, r.o.Catchup, nil, func() error {
		for _, s := range r.subs {
			if !s.subscribed() {
				return fmt.Errorf("s%d is not subscribed to every channel", s.id)
			}
		}
		return nil
	}, func() string { return "" })
	if err != nil {
		problems = append(problems, "after the faults: "+err.Error())
	}
	return problems
}

// catchUp waits, within the run's Catchup, until every subscriber has received the last
// acknowledged event of every publisher on every channel; it returns who had not.
func (r *run) catchUp(ctx context.Context) []string {
	behind := func() []string {
		var out []string
		for _, s := range r.subs {
			for _, p := range r.pubs {
				for _, ch := range p.channels {
					if last := p.last(ch); s.highest(ch, p.id) < last {
						out = append(out, fmt.Sprintf("s%d has %s's events on %s up to %d of %d", s.id, p.id, ch, s.highest(ch, p.id), last))
					}
				}
			}
			if r.kafka != nil {
				for _, ch := range r.kafka.channels {
					if last := r.kafka.last(ch); s.highest(ch, r.kafka.id) < last {
						out = append(out, fmt.Sprintf("s%d has Kafka's records on %s up to %d of %d", s.id, ch, s.highest(ch, r.kafka.id), last))
					}
				}
			}
		}
		return out
	}
	deadline := time.Now().Add(r.o.Catchup)
	for {
		b := behind()
		if len(b) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if len(b) > 10 {
				b = append(b[:10], fmt.Sprintf("and %d more", len(b)-10))
			}
			return []string{fmt.Sprintf("the subscribers had not caught up %v after the faults ended: %s", r.o.Catchup, strings.Join(b, "; "))}
		}
		time.Sleep(200 * time.Millisecond) // the polling interval of the catch-up
	}
}

func (r *run) busServers() int {
	if r.bus == nil {
		return 0
	}
	return len(r.bus.servers)
}

// report checks what every subscriber received and sums up the run.
func (r *run) report(steps []Step) *Report {
	o := r.o
	rep := &Report{Setup: o.Setup, Seed: o.Seed, Duration: o.Duration, Network: "loopback", Nodes: len(r.nodes),
		Publishers: o.Publishers, Subscribers: o.Subscribers, Kafka: r.kafka != nil, Schedule: steps,
		Faults: map[Fault]int{}, Failures: map[string]int{}, Closes: map[string]int{},
		Options: fmt.Sprintf("--channels %d --publishers %d --subscribers %d --rate %g --fault-every %s --pause %s --partition %s --down %s --redis-aof %s",
			o.Channels, o.Publishers, o.Subscribers, o.Rate, o.FaultEvery, o.Pause, o.Partition, o.Down, o.RedisAOF)}
	if o.PowerCut {
		rep.Options += " --power-cut"
	}
	if o.NATSSync != "" {
		rep.Options += " --nats-sync " + o.NATSSync
	}
	if len(o.Faults) > 0 {
		var fs []string
		for _, f := range o.Faults {
			fs = append(fs, string(f))
		}
		rep.Options += " --faults " + strings.Join(fs, ",")
	}
	if r.net.isolated {
		rep.Network = "namespaces"
	}
	if r.net.refused != "" {
		rep.Notes = append(rep.Notes, r.net.refused)
	}
	for _, s := range steps {
		switch {
		case s.Started == 0:
		case s.Err != "":
			rep.FaultErrors++
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s of %d at %v: %s", s.Fault, s.Target, s.Started.Round(time.Millisecond), s.Err))
		default:
			rep.Faults[s.Fault]++
		}
	}
	var published []Published
	for _, p := range r.pubs {
		events, failures := p.record()
		published = append(published, events...)
		for _, e := range events {
			rep.Attempts += e.Attempts
		}
		rep.Failures = addCounts(rep.Failures, failures)
	}
	if r.kafka != nil {
		events, failures := r.kafka.record()
		published = append(published, events...)
		for _, e := range events {
			rep.Attempts += e.Attempts
		}
		rep.Failures = addCounts(rep.Failures, failures)
	}
	var logs [][]Entry
	for _, s := range r.subs {
		log := s.log()
		for _, e := range log {
			switch {
			case e.Kind == Connected:
				rep.Connections++
			case e.Kind == Closed && e.Code == 0:
				rep.Closes["no close frame"]++
			case e.Kind == Closed:
				rep.Closes[strconv.Itoa(e.Code)]++
			}
		}
		logs = append(logs, log)
	}
	rep.Channels = check(r.channels(), published, logs)
	if err := writeLogs(r.dir, published, logs); err != nil {
		rep.Problems = append(rep.Problems, "writing the logs: "+err.Error())
	}
	rep.Totals.Channel = "total"
	for i := range rep.Channels {
		rep.Totals.add(&rep.Channels[i])
	}
	rep.Elapsed = time.Since(r.start)
	return rep
}

//go:build linux

package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/chaos/lazyfs"
)

// run is one run of the harness: what it started, in the order it stops them.
type run struct {
	o     Options
	start time.Time
	dir   string
	temp  bool // dir was made for the run: removed unless it failed

	net   *network
	bus   *bus
	disks []*lazyfs.FS // with Options.PowerCut: each bus server's data directory
	kafka *kafkaSource // nil without Options.Kafka
	app   *herald.App
	nodes []*node
	subs  []*subscriber
	pubs  []*publisher

	stopSubs func()         // ends the subscribers' connections
	subsDone sync.WaitGroup // the subscribers' goroutines
}

// Run runs the harness as o says and returns its report. An error is a run that could not
// be set up or was interrupted (a missing binary, a node that did not start, ctx ended);
// what the checker found is in the report (Report.Failed).
func Run(ctx context.Context, o Options) (*Report, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &run{o: o, start: time.Now(), app: newApp(), dir: o.Dir}
	if r.dir == "" {
		if r.dir, err = os.MkdirTemp("", "herald-chaos-"); err != nil {
			return nil, err
		}
		r.temp = true
	} else if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return nil, err
	}
	failed := true
	defer func() { r.close(failed) }()
	r.stopSubs = func() {}
	err = r.setUp(ctx)
	var rep *Report
	if err == nil {
		rep, err = r.faults(ctx)
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("interrupted (%w); the run's files: %s", ctx.Err(), r.dir)
	}
	if err != nil {
		return nil, fmt.Errorf("%w; the run's files: %s", err, r.dir)
	}
	failed = rep.Failed()
	if failed || !r.temp {
		rep.Dir = r.dir
	}
	return rep, nil
}

// setUp starts the bus, Kafka, the nodes and the subscribers, and warms every channel up.
func (r *run) setUp(ctx context.Context) error {
	o := r.o
	log := o.Log
	log.Info("run", "setup", o.Setup, "seed", o.Seed, "duration", o.Duration, "dir", r.dir)
	r.net = newNetwork(log, o.Nodes, o.Loopback)
	var err error
	switch o.Setup {
	case Redis:
		bin, lerr := lookBinary(o.RedisServer, "redis-server")
		if lerr != nil {
			return lerr
		}
		r.bus, err = newRedis(r.net, r.dir, bin, o.RedisAOF)
	case NATS:
		bin, lerr := lookBinary(o.NATSServer, "nats-server")
		if lerr != nil {
			return lerr
		}
		r.bus, err = newNATS(r.net, r.dir, bin, o.NATSSync, 3)
	}
	if err != nil {
		return err
	}
	if o.PowerCut {
		if err := r.mountDisks(); err != nil {
			return err
		}
	}
	if r.bus != nil {
		for _, s := range r.bus.servers {
			if err := s.start(ctx); err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
		}
		if err := poll(ctx, 2*startWait, nil, r.bus.formed, func() string { return "" }); err != nil {
			return fmt.Errorf("the bus: %w", err)
		}
	}
	cfg := nodeConfig{app: r.app, history: 100_000, activity: activityTimeout, secret: randomHex(32)}
	if o.Kafka {
		if r.kafka, err = startKafka(ctx, r.net, r.dir, o, r.start); err != nil {
			return err
		}
		cfg.kafka, cfg.topic = r.kafka.addr, r.kafka.topic
	}
	path, err := writeFile(r.dir, "herald.yaml", cfg.yaml())
	if err != nil {
		return err
	}
	for i := 1; i <= o.Nodes; i++ {
		port := nodePort
		if !r.net.isolated {
			if port, err = freePort(); err != nil {
				return err
			}
		}
		url := ""
		if r.bus != nil {
			url = r.bus.url(i)
		}
		n := newNode(r.net, r.dir, o.Herald, path, i, port, url)
		r.nodes = append(r.nodes, n)
		if err := n.start(ctx); err != nil {
			return err
		}
	}
	for _, n := range r.nodes {
		if err := n.waitUp(ctx, startWait, connected); err != nil {
			return err
		}
	}
	log.Info("nodes up", "nodes", len(r.nodes))
	chans := r.channels()
	for i := 1; i <= o.Subscribers; i++ {
		r.subs = append(r.subs, newSubscriber(i, chans, r.nodes, r.app.Key, r.start, o.Seed))
	}
	return r.warmUp(ctx)
}

// channels is every channel of the run: the REST publishers', then Kafka's.
func (r *run) channels() []string {
	var cs []string
	for i := 1; i <= r.o.Channels; i++ {
		cs = append(cs, "chaos-"+strconv.Itoa(i))
	}
	if r.kafka != nil {
		cs = append(cs, r.kafka.channels...)
	}
	return cs
}

// BuildHerald builds cmd/herald into dir and returns the binary's path; the go command must
// run inside herald's module.
func BuildHerald(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "herald")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/herald-rt/herald/cmd/herald").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/herald: %v: %s", err, out)
	}
	return bin, nil
}

// close stops every process the run started, by its pid, removes the namespaces and links,
// and the run's directory when the run made it and did not fail.
func (r *run) close(failed bool) {
	r.stopSubs()
	for _, s := range r.subs {
		s.stop()
	}
	r.subsDone.Wait()
	for _, n := range r.nodes {
		n.proc.kill()
	}
	if r.kafka != nil {
		r.kafka.close()
	}
	if r.bus != nil {
		for _, s := range r.bus.servers {
			s.proc.kill()
		}
	}
	r.unmountDisks()
	if r.net != nil {
		r.net.remove()
	}
	if r.temp && !failed {
		_ = os.RemoveAll(r.dir)
	}
}

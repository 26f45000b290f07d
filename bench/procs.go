package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// children is subscribers spread over child processes (Target.Procs), each running
// Target.Child, which serves RunChild. See child.go for the protocol.
type children struct {
	kids    []*kid
	s       Setup
	rss0    int64
	timeout time.Duration
}

// kid is one child process.
type kid struct {
	n       int // its index, for messages
	cmd     *exec.Cmd
	in      io.WriteCloser
	replies chan childReply // closed when its output ends
	stderr  *tail
}

// startChildren starts t.Procs children, gives each its share of spec's connections (and of
// the rate and concurrency) and waits for all to be subscribed.
func startChildren(ctx context.Context, t Target, spec subSpec) (subscribers, error) {
	t = t.withDefaults()
	g := &children{timeout: t.Timeout}
	g.rss0, _ = self().rss() // the parent is measured with its children
	n := t.Procs
	for k, share := range shares(spec, n) {
		kd, err := startKid(k, t.Child, t.Timeline)
		if err != nil {
			g.abort()
			return nil, err
		}
		g.kids = append(g.kids, kd)
		order := childOrder{Start: &childStart{WS: t.WS, CAFile: t.CAFile, Key: t.Key, Timeout: t.Timeout,
			Concurrency: max(1, t.Concurrency/n), Rate: t.Rate / float64(n), Activity: t.ActivityTimeout, Sources: t.Sources, Spec: share}}
		if err := kd.send(order); err != nil {
			g.abort()
			return nil, err
		}
	}
	phase := t.Timeout + 5*time.Second
	if t.Rate > 0 {
		phase += time.Duration(float64(spec.Conns) / t.Rate * float64(time.Second))
	}
	var errs []error
	for i, kd := range g.kids {
		r, err := kd.reply(ctx, phase)
		if err == nil && r.Setup == nil {
			err = fmt.Errorf("no setup in its reply")
		}
		if r.Setup != nil {
			g.s.merge(*r.Setup)
		}
		g.rss0 += r.RSSBefore
		if err != nil {
			errs = append(errs, fmt.Errorf("child %d: %w", i, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		g.abort()
		return g, err
	}
	return g, nil
}

// shares splits spec's connections over n children: consecutive runs of the run's connection
// indexes, each child's Offset its first. A child's client j is the run's connection
// Offset+j, so channels and nodes are assigned as they would be in one process.
func shares(spec subSpec, n int) []subSpec {
	out := make([]subSpec, n)
	offset := 0
	for k := range out {
		share := spec
		share.Conns = spec.Conns / n
		if k < spec.Conns%n {
			share.Conns++
		}
		share.Offset = spec.Offset + offset
		offset += share.Conns
		out[k] = share
	}
	return out
}

// startKid starts child n; its progress goes to tl (when not nil), its replies to kid.replies.
func startKid(n int, argv []string, tl *Timeline) (*kid, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	kd := &kid{n: n, cmd: cmd, in: in, replies: make(chan childReply, 4), stderr: &tail{max: 4096}}
	cmd.Stderr = kd.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start child %q: %w", argv, err)
	}
	go func() {
		defer close(kd.replies)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), maxChildLine)
		var last relayState
		for sc.Scan() {
			var r childReply
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				r = childReply{Error: fmt.Sprintf("unreadable reply %.200q: %v", sc.Bytes(), err)}
			}
			if r.Progress != nil {
				if tl != nil {
					tl.absorb(&last, *r.Progress)
				}
				continue
			}
			kd.replies <- r
		}
	}()
	return kd, nil
}

func (kd *kid) send(o childOrder) error {
	b, _ := json.Marshal(o)
	if _, err := kd.in.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("child %d (pid %d): %w%s", kd.n, kd.cmd.Process.Pid, err, kd.stderr.note())
	}
	return nil
}

// reply waits at most d for the child's next reply.
func (kd *kid) reply(ctx context.Context, d time.Duration) (childReply, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case r, ok := <-kd.replies:
		switch {
		case !ok:
			return r, fmt.Errorf("exited without answering%s", kd.stderr.note())
		case r.Error != "":
			return r, errors.New(r.Error)
		}
		return r, nil
	case <-t.C:
		return childReply{}, fmt.Errorf("no answer within %v%s", d, kd.stderr.note())
	case <-ctx.Done():
		return childReply{}, context.Cause(ctx)
	}
}

func (g *children) setup() Setup     { return g.s }
func (g *children) rssBefore() int64 { return g.rss0 }

func (g *children) pids() []int {
	var pids []int
	for _, kd := range g.kids {
		pids = append(pids, kd.cmd.Process.Pid)
	}
	return pids
}

func (g *children) await(ctx context.Context, wait time.Duration) (bool, error) {
	for _, kd := range g.kids {
		if err := kd.send(childOrder{Await: int64(wait)}); err != nil {
			return false, err
		}
	}
	all := true
	for i, kd := range g.kids {
		r, err := kd.reply(ctx, wait+g.timeout)
		if err == nil && r.Awaited == nil {
			err = errors.New("no await in its reply")
		}
		if err != nil {
			return false, fmt.Errorf("child %d: %w", i, err)
		}
		all = all && *r.Awaited
	}
	return all, nil
}

func (g *children) pings(ctx context.Context, activity time.Duration) (PingCounts, error) {
	ns := int64(activity)
	for _, kd := range g.kids {
		if err := kd.send(childOrder{Pings: &ns}); err != nil {
			return PingCounts{}, err
		}
	}
	var sum PingCounts
	for i, kd := range g.kids {
		r, err := kd.reply(ctx, g.timeout)
		if err == nil && r.Pings == nil {
			err = errors.New("no ping counts in its reply")
		}
		if err != nil {
			return sum, fmt.Errorf("child %d: %w", i, err)
		}
		sum.add(*r.Pings)
	}
	return sum, nil
}

func (g *children) finish(ctx context.Context) (*tally, error) {
	for _, kd := range g.kids {
		if err := kd.send(childOrder{Finish: true}); err != nil {
			g.abort()
			return nil, err
		}
	}
	var sum *tally
	for i, kd := range g.kids {
		r, err := kd.reply(ctx, 2*g.timeout)
		if err == nil && r.Tally == nil {
			err = errors.New("no tally in its reply")
		}
		if err != nil {
			g.abort()
			return nil, fmt.Errorf("child %d: %w", i, err)
		}
		if sum == nil {
			sum = r.Tally
			sum.Delivery.finish()
		} else {
			sum.merge(r.Tally)
		}
	}
	for _, kd := range g.kids {
		_ = kd.in.Close()
		_ = kd.cmd.Wait()
	}
	return sum, nil
}

// abort closes the children's input, which makes them close their connections and exit, and
// kills those that have not exited after the timeout.
func (g *children) abort() {
	var wg sync.WaitGroup
	for _, kd := range g.kids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = kd.in.Close()
			done := make(chan struct{})
			go func() { _ = kd.cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(g.timeout):
				_ = kd.cmd.Process.Kill()
				<-done
			}
		}()
	}
	wg.Wait()
}

// tail keeps the last max bytes written to it: a child's standard error, for error messages.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tail) note() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := strings.TrimSpace(string(t.b)); s != "" {
		return "; its stderr: " + s
	}
	return ""
}

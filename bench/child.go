package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// A parent and its children (Target.Procs) talk in lines of JSON over the children's standard
// input and output: the parent sends start; the child connects and answers with its setup;
// the parent publishes, sends await and the child answers when its deliveries are in (or the
// wait passed); the parent sends finish and the child closes its connections, answers with
// its tally and exits. A child whose input ends closes everything and exits.

// childOrder is one line from the parent.
type childOrder struct {
	Start  *childStart `json:"start,omitempty"`
	Await  int64       `json:"await_ns,omitempty"` // wait at most this long for every delivery
	Finish bool        `json:"finish,omitempty"`
	// Pings asks for the clients' ping counts, setting their own activity timeout first
	// (ns; 0: leave it).
	Pings *int64 `json:"pings_activity_ns,omitempty"`
}

// childStart is what a child needs to open its share of the subscribers.
type childStart struct {
	WS          string        `json:"ws"`
	CAFile      string        `json:"ca_file,omitempty"`
	Key         string        `json:"key"`
	Timeout     time.Duration `json:"timeout"`
	Concurrency int           `json:"concurrency"`
	Rate        float64       `json:"rate"`
	Activity    time.Duration `json:"activity"`
	Sources     int           `json:"sources,omitempty"`
	Spec        subSpec       `json:"spec"`
}

// childReply is one line from a child.
type childReply struct {
	Setup     *Setup      `json:"setup,omitempty"`
	RSSBefore int64       `json:"rss_before,omitempty"`
	Awaited   *bool       `json:"awaited,omitempty"` // every expected delivery arrived
	Tally     *tally      `json:"tally,omitempty"`
	Pings     *PingCounts `json:"pings,omitempty"`
	Error     string      `json:"error,omitempty"`
	// Progress is unsolicited: what the child's clients recorded lately (timeline_relay.go).
	Progress *progress `json:"progress,omitempty"`
}

// relayEvery is how often a child relays its progress.
const relayEvery = 250 * time.Millisecond

// maxChildLine bounds one line of the protocol (a tally with its histograms is a few KiB).
const maxChildLine = 64 << 20

// RunChild serves one child process of a run with Target.Procs: it reads the parent's orders
// from in and writes its replies to out. It returns when the parent sent finish or its input
// ended.
func RunChild(ctx context.Context, in io.Reader, out io.Writer) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxChildLine)
	next := func() (childOrder, error) {
		var o childOrder
		if !sc.Scan() {
			if err := sc.Err(); err != nil {
				return o, err
			}
			return o, io.EOF
		}
		return o, json.Unmarshal(sc.Bytes(), &o)
	}
	o, err := next()
	if err != nil || o.Start == nil {
		return fmt.Errorf("child: want a start order: %v", err)
	}
	s := o.Start
	tl := NewTimeline()
	t := Target{WS: s.WS, CAFile: s.CAFile, Key: s.Key, Timeout: s.Timeout, Concurrency: s.Concurrency, Rate: s.Rate,
		ActivityTimeout: s.Activity, Sources: s.Sources, Timeline: tl}
	// Replies and progress share out: one encoder under one lock.
	var mu sync.Mutex
	enc := json.NewEncoder(out)
	send := func(r childReply) error {
		mu.Lock()
		defer mu.Unlock()
		return enc.Encode(r)
	}
	stop := make(chan struct{})
	relayed := make(chan struct{})
	go func() {
		defer close(relayed)
		tick := time.NewTicker(relayEvery)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				p := tl.drain()
				_ = send(childReply{Progress: &p})
			case <-stop:
				return
			}
		}
	}()
	defer func() { close(stop); <-relayed }()
	l, err := subscribeHere(ctx, t, s.Spec)
	if err != nil {
		reply := childReply{Error: err.Error()}
		if l != nil {
			reply.Setup = &l.s
		}
		return errors.Join(err, send(reply))
	}
	setup := l.setup()
	if err := send(childReply{Setup: &setup, RSSBefore: l.rssBefore()}); err != nil {
		l.abort()
		return err
	}
	for {
		o, err := next()
		switch {
		case err != nil:
			l.abort()
			if err == io.EOF {
				return errors.New("child: the parent went away")
			}
			return err
		case o.Await > 0:
			ok, err := l.await(ctx, time.Duration(o.Await))
			if err != nil {
				l.abort()
				return errors.Join(err, send(childReply{Error: err.Error()}))
			}
			p := tl.drain() // the parent's timeline has every delivery before the answer
			_ = send(childReply{Progress: &p})
			if err := send(childReply{Awaited: &ok}); err != nil {
				l.abort()
				return err
			}
		case o.Pings != nil:
			c, _ := l.pings(ctx, time.Duration(*o.Pings))
			if err := send(childReply{Pings: &c}); err != nil {
				l.abort()
				return err
			}
		case o.Finish:
			t, err := l.finish(ctx)
			if err != nil {
				return errors.Join(err, send(childReply{Error: err.Error()}))
			}
			p := tl.drain()
			_ = send(childReply{Progress: &p})
			return send(childReply{Tally: t})
		}
	}
}

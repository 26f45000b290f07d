package bench

import (
	"context"
	"time"
)

// subSpec says who subscribes to what, in a form a child process can be sent: client g
// (counting from Offset) joins PerClient of Channels, starting at (g × PerClient) mod
// len(Channels), and expects events 1..Events on each.
type subSpec struct {
	Conns     int      `json:"conns"`
	Offset    int      `json:"offset"`
	Channels  []string `json:"channels"`
	PerClient int      `json:"per_client"`
	Events    int      `json:"events"`
	// BucketSize, when set, also keeps a latency histogram per BucketSize consecutive seqs
	// (fanout: per event; multichannel: per round).
	BucketSize int `json:"bucket_size,omitempty"`
	// Reconnect brings back the clients the server closes, as pusher-js does (reconnect.go).
	Reconnect bool `json:"reconnect,omitempty"`
}

// chansOf returns the channels of client i of this spec. Clients joining the same channels
// share one slice.
func (s subSpec) chansOf() func(i int) []int32 {
	per := max(s.PerClient, 1)
	rot := make([][]int32, len(s.Channels))
	for r := range rot {
		rot[r] = make([]int32, per)
		for k := range per {
			rot[r][k] = int32((r + k) % len(s.Channels))
		}
	}
	return func(i int) []int32 { return rot[((s.Offset+i)*per)%len(rot)] }
}

func (s subSpec) recorder(tl *Timeline) *recorder {
	rec := newRecorder(s.Channels, s.Events, tl)
	if s.BucketSize > 0 {
		size := s.BucketSize
		rec.withBuckets((s.Events+size-1)/size, func(seq int) int { return (seq - 1) / size })
	}
	return rec
}

// subscribers is the subscribing side of a run: a pool in this process, or children.
type subscribers interface {
	setup() Setup
	// await waits until every expected delivery has arrived (true) or wait has passed.
	await(ctx context.Context, wait time.Duration) (bool, error)
	// finish closes every connection and returns what the subscribers saw.
	finish(ctx context.Context) (*tally, error)
	// abort closes every connection on an error path.
	abort()
	// pids are the processes holding the connections (nil: this one).
	pids() []int
	// rssBefore is the RSS of those processes before they connected.
	rssBefore() int64
	// pings sets the clients' own activity timeout (0: leave it) and returns their ping
	// counts so far.
	pings(ctx context.Context, activity time.Duration) (PingCounts, error)
}

// tally is what a set of subscribers saw; tallies of several processes merge.
type tally struct {
	Delivery Delivery  `json:"delivery"`
	Lost     Lost      `json:"lost"`
	Latency  histogram `json:"latency"`
	// FromSchedule is the latency from the time each event was scheduled to be sent.
	FromSchedule histogram   `json:"from_schedule"`
	Buckets      []histogram `json:"buckets,omitempty"`
	BucketsSched []histogram `json:"buckets_sched,omitempty"`
	BucketLastNs []int64     `json:"bucket_last_ns,omitempty"` // per bucket: its last first receipt, unix ns
	LastNs       int64       `json:"last_ns"`                  // receive time of the last first receipt, unix ns
	// Reconnect is how the clients the server closed came back; nil without subSpec.Reconnect.
	Reconnect *ReconnectCounts `json:"reconnect,omitempty"`
}

func (t *tally) merge(o *tally) {
	t.Delivery.merge(o.Delivery)
	t.Delivery.finish()
	t.Lost.merge(o.Lost)
	t.Latency.merge(o.Latency)
	t.FromSchedule.merge(o.FromSchedule)
	for i := range min(len(t.Buckets), len(o.Buckets)) {
		t.Buckets[i].merge(o.Buckets[i])
	}
	for i := range min(len(t.BucketsSched), len(o.BucketsSched)) {
		t.BucketsSched[i].merge(o.BucketsSched[i])
	}
	for i := range min(len(t.BucketLastNs), len(o.BucketLastNs)) {
		t.BucketLastNs[i] = max(t.BucketLastNs[i], o.BucketLastNs[i])
	}
	t.LastNs = max(t.LastNs, o.LastNs)
	if o.Reconnect != nil {
		if t.Reconnect == nil {
			t.Reconnect = &ReconnectCounts{}
		}
		t.Reconnect.merge(*o.Reconnect)
	}
}

// subscribe opens spec's subscribers in this process or, with t.Procs > 1, in children.
func subscribe(ctx context.Context, t Target, spec subSpec) (subscribers, error) {
	if t.Procs > 1 {
		return startChildren(ctx, t, spec)
	}
	l, err := subscribeHere(ctx, t, spec)
	if l == nil {
		return nil, err
	}
	return l, err
}

// local is subscribers in this process.
type local struct {
	p       *pool
	rec     *recorder
	spec    subSpec
	s       Setup
	timeout time.Duration
	rss0    int64
}

func subscribeHere(ctx context.Context, t Target, spec subSpec) (*local, error) {
	t = t.withDefaults()
	rss0, _ := self().rss()
	rec := spec.recorder(t.Timeline)
	p, err := newPool(rec, t.Timeline)
	if err != nil {
		return nil, err
	}
	if spec.Reconnect {
		if p.re, err = newRedialer(p, t); err != nil {
			p.close(t.Timeout)
			return nil, err
		}
	}
	p.startPings(t.ActivityTimeout)
	l := &local{p: p, rec: rec, spec: spec, timeout: t.Timeout, rss0: rss0}
	l.s, err = connect(ctx, t, p, spec.Offset, spec.Conns, spec.chansOf())
	if err != nil {
		p.close(t.Timeout)
		return l, err
	}
	perClient := int64(max(spec.PerClient, 1)) * int64(spec.Events)
	if p.re != nil {
		p.re.awaitSetups(ctx, t.Timeout)
		p.re.expect(l.s.Established, perClient)
	} else {
		rec.expect(int64(l.s.Established) * perClient)
	}
	return l, nil
}

func (l *local) setup() Setup     { return l.s }
func (l *local) pids() []int      { return nil }
func (l *local) rssBefore() int64 { return l.rss0 }
func (l *local) abort()           { l.p.close(l.timeout) }

func (l *local) pings(_ context.Context, activity time.Duration) (PingCounts, error) {
	return l.p.setActivity(activity), nil
}

func (l *local) await(ctx context.Context, wait time.Duration) (bool, error) {
	ok := l.rec.await(ctx, wait)
	return ok, context.Cause(ctx)
}

func (l *local) finish(context.Context) (*tally, error) {
	if err := l.p.close(l.timeout); err != nil {
		return nil, err
	}
	t := l.rec.tally()
	t.Lost = l.p.lostSoFar()
	if l.p.re != nil {
		r := l.p.re.report()
		t.Reconnect = &r
	}
	events := int32(l.spec.Events)
	t.Delivery = l.p.delivery(func(int) int32 { return events }, nil)
	return t, nil
}

// tally merges the recorder's latency shards; the delivery counts come from the pool.
func (r *recorder) tally() *tally {
	t := &tally{Latency: newHistogram(), FromSchedule: newHistogram(), Buckets: newHistograms(r.buckets),
		BucketsSched: newHistograms(r.buckets), BucketLastNs: make([]int64, r.buckets)}
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		t.Latency.merge(s.all)
		t.FromSchedule.merge(s.fromSched)
		for j := range min(len(t.Buckets), len(s.bucket)) {
			t.Buckets[j].merge(s.bucket[j])
			t.BucketsSched[j].merge(s.bucketSched[j])
			t.BucketLastNs[j] = max(t.BucketLastNs[j], s.bucketLast[j])
		}
		t.LastNs = max(t.LastNs, s.lastNs)
		s.mu.Unlock()
	}
	return t
}

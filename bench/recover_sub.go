package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// stage is where a recover client stands.
type stage uint8

const (
	stageSubscribing stage = iota // first connection, before its pusher_internal:recovery
	stageLive                     // it knows its position and follows the live events
	stageRecovering               // reconnecting: resubscribed with recover, before the answer
	stageRecovered                // recovered:true with every missed event once, in order
	stageFailed                   // anything else; reason says what
)

// position is where a client stands in its channel's history, as a subscribe's recover
// names it.
type position struct {
	Epoch  string `json:"epoch"`
	Offset uint64 `json:"offset"`
}

// recoverSub is one recover client across its two connections: what it remembers and what it
// saw. Its tracks belong to whichever connection is open (one at a time); the rest is guarded
// by mu.
type recoverSub struct {
	tracks []track // one: the client's channel
	ch     int32   // its channel, in the run's names

	mu       sync.Mutex
	stage    stage
	known    bool   // it got its first pusher_internal:recovery: epoch and last are a position
	epoch    string // "" for a channel that had no event yet (a cluster's empty history)
	last     uint64 // offset of the last event handled, or of that frame
	pending  uint64 // the offset announced by the last position frame, for the event after it
	hasNext  bool   // pending is set
	posErrs  int32  // positions that did not follow (see recoverRun.event)
	replayed int32  // events between the resubscription and the recovery frame
	late     int32  // events published during the outage that came after the recovery frame
	dialAt   int64  // unix ns: when its reconnect started
	conn     *client
	reason   string // why it failed
	settled  bool   // recovered or failed: counted once
	stay     bool   // on a node that lives on when RecoverConfig.Kill ends another: it does not reconnect
}

// recoverRun is the state of one recover run that the clients' readers update.
type recoverRun struct {
	names []string
	subs  []recoverSub
	chans [][]int32 // client i's channel list, shared between clients of a channel
	rec   *recorder
	// base is, per channel, offset - seq of its events (every client must see the same);
	// noBase until the first event.
	base []atomic.Int64
	// outageLast is the last seq published before the reconnect, and outageFailed the seqs
	// up to it whose publish failed (they are not required); both are set before it.
	outageLast   int
	outageFailed []map[int]bool
	start        time.Time // when the reconnect started
	killedAt     time.Time // when Kill was called

	positioned *countdown // clients that know their first position
	settled    *countdown // clients recovered or failed
	afterFrom  atomic.Int64
	after      *countdown // first receipts of the events after the recovery

	mu       sync.Mutex // guards what follows
	lat      histogram  // its reconnect → its recovery frame
	latStart histogram  // the reconnect phase's start → its recovery frame
	lastDone int64      // unix ns: the latest recovery frame of a recovered client
}

const noBase = math.MinInt64

func newRecoverRun(names []string, clients int, tl *Timeline) *recoverRun {
	r := &recoverRun{names: names, subs: make([]recoverSub, clients), chans: make([][]int32, clients),
		base: make([]atomic.Int64, len(names)), lat: newHistogram(), latStart: newHistogram(),
		positioned: newCountdown(), settled: newCountdown(), after: newCountdown()}
	for k := range r.base {
		r.base[k].Store(noBase)
	}
	r.afterFrom.Store(math.MaxInt64)
	byChannel := make([][]int32, len(names))
	for k := range byChannel {
		byChannel[k] = []int32{int32(k)}
	}
	for i := range r.subs {
		ch := i % len(names)
		r.subs[i].ch, r.subs[i].tracks, r.chans[i] = int32(ch), make([]track, 1), byChannel[ch]
	}
	r.rec = newRecorder(names, publishMaxSeq, tl)
	r.rec.other = r.frame
	r.rec.seen = r.event
	r.rec.recoverFrom = r.recoverFrom
	return r
}

// recoverFrom is the position client c's subscribe names: none on its first connection.
func (r *recoverRun) recoverFrom(c *client, _ int) any {
	s := &r.subs[c.index]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stage != stageRecovering || !s.known {
		return nil
	}
	return position{Epoch: s.epoch, Offset: s.last}
}

// event checks the position of event seq, which c has just counted: it must be the offset
// its position frame announced, one past the last event the client handled, and seq's
// offset for every client of the channel.
func (r *recoverRun) event(c *client, _ int, seq int, first bool) {
	s := &r.subs[c.index]
	s.mu.Lock()
	ok := s.hasNext && s.pending == s.last+1
	if s.hasNext {
		s.last = s.pending
		base := int64(s.pending) - int64(seq)
		if !r.base[s.ch].CompareAndSwap(noBase, base) && r.base[s.ch].Load() != base {
			ok = false
		}
	}
	s.hasNext = false
	if !ok {
		s.posErrs++
	}
	switch s.stage {
	case stageRecovering:
		s.replayed++
	case stageRecovered, stageFailed:
		if seq <= r.outageLast {
			s.late++
		}
	}
	s.mu.Unlock()
	if first && int64(seq) > r.afterFrom.Load() {
		r.after.add(1)
	}
}

// frame handles a message that is not a bench event: position and recovery frames.
func (r *recoverRun) frame(c *client, p []byte) {
	switch {
	case bytes.Contains(p, positionEvent):
		epoch, offset, ok := parsePosition(p)
		s := &r.subs[c.index]
		s.mu.Lock()
		switch {
		case !ok || s.hasNext:
			s.posErrs++
		case s.epoch == "" && s.known:
			s.epoch = string(epoch) // the channel's first event gave it its epoch
		case string(epoch) != s.epoch:
			s.posErrs++
		}
		s.pending, s.hasNext = offset, ok
		s.mu.Unlock()
	case bytes.Contains(p, recoveryEvent):
		r.recovery(c, p)
	}
}

var (
	positionEvent = []byte(`"event":"pusher_internal:position"`)
	recoveryEvent = []byte(`"event":"pusher_internal:recovery"`)
	escEpochKey   = []byte(`\"epoch\":\"`)
	escOffsetKey  = []byte(`\"offset\":`)
)

// parsePosition reads a position frame's epoch (aliasing p) and offset: the compact form
// herald writes first, then any JSON.
func parsePosition(p []byte) (epoch []byte, offset uint64, ok bool) {
	if i := bytes.Index(p, escEpochKey); i >= 0 {
		e := p[i+len(escEpochKey):]
		if j := bytes.IndexByte(e, '\\'); j >= 0 && bytes.HasPrefix(e[j:], []byte(`\"`)) {
			if n, ok := intAfter(p, escOffsetKey); ok {
				return e[:j], uint64(n), true
			}
		}
	}
	d, ok := historyData(p)
	return []byte(d.Epoch), d.Offset, ok && d.Epoch != ""
}

// recoveryData is the data of pusher_internal:position and pusher_internal:recovery.
type recoveryData struct {
	Epoch     string `json:"epoch"`
	Offset    uint64 `json:"offset"`
	Recovered *bool  `json:"recovered"`
	Reason    string `json:"reason"`
}

// historyData decodes the data string of a position or recovery frame.
func historyData(p []byte) (recoveryData, bool) {
	var m struct {
		Data json.RawMessage `json:"data"`
	}
	var d recoveryData
	if json.Unmarshal(p, &m) != nil {
		return d, false
	}
	data := []byte(m.Data)
	var s string
	if json.Unmarshal(data, &s) == nil {
		data = []byte(s)
	}
	return d, json.Unmarshal(data, &d) == nil
}

// recovery handles a pusher_internal:recovery: a first connection's position, or a
// reconnect's answer.
func (r *recoverRun) recovery(c *client, p []byte) {
	now := time.Now()
	d, ok := historyData(p)
	s := &r.subs[c.index]
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ok {
		s.posErrs++
		return
	}
	switch s.stage {
	case stageSubscribing:
		s.epoch, s.last, s.known, s.stage = d.Epoch, d.Offset, true, stageLive
		r.positioned.add(1)
		return
	case stageRecovering:
	default:
		s.posErrs++ // one per subscription
		return
	}
	reason := r.judge(s, d)
	if d.Epoch != s.epoch && d.Recovered != nil && !*d.Recovered {
		s.epoch = d.Epoch // the live events go on in the new epoch
	}
	s.last, s.hasNext = d.Offset, false
	if reason != "" {
		r.settleLocked(s, reason)
		return
	}
	s.stage = stageRecovered
	r.settleLocked(s, "")
	r.mu.Lock()
	r.lat.record(now.UnixNano() - s.dialAt)
	r.latStart.record(now.Sub(r.start).Nanoseconds())
	r.lastDone = max(r.lastDone, now.UnixNano())
	r.mu.Unlock()
}

// judge returns why the answer d to a reconnect is not a recovery ("" when it is): every
// event up to outageLast in the client's track once, in order, positions that follow, and
// the live events going on from the last of them. s.mu is held.
func (r *recoverRun) judge(s *recoverSub, d recoveryData) string {
	t := &s.tracks[0]
	switch {
	case d.Recovered == nil:
		return "no \"recovered\" in the answer"
	case !*d.Recovered:
		return "recovered:false, " + d.Reason
	case d.Epoch != s.epoch:
		return "recovered:true in another epoch"
	case s.posErrs > 0:
		return "positions that do not follow"
	case t.dup > 0:
		return "duplicated events"
	case t.ooo > 0:
		return "events out of order"
	case d.Offset != s.last:
		return "recovery offset not the last replayed event's"
	}
	failed := r.outageFailed[s.ch]
	for seq := 1; seq <= r.outageLast; seq++ {
		if !failed[seq] && !t.has(int32(seq)) {
			return "missed events not replayed"
		}
	}
	return ""
}

// fail settles s as failed for reason unless it already settled.
func (r *recoverRun) fail(s *recoverSub, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.settleLocked(s, reason)
}

// settleLocked counts s as settled, failed for reason when not empty; s.mu is held.
func (r *recoverRun) settleLocked(s *recoverSub, reason string) {
	if s.settled {
		return
	}
	s.settled = true
	if reason != "" {
		s.stage, s.reason = stageFailed, reason
	}
	r.settled.add(1)
}

// countdown is a count that closes done when it reaches its target. It is safe for
// concurrent use.
type countdown struct {
	n, target atomic.Int64
	done      chan struct{}
	once      sync.Once
}

func newCountdown() *countdown {
	c := &countdown{done: make(chan struct{})}
	c.target.Store(math.MaxInt64)
	return c
}

func (c *countdown) add(k int64) {
	if c.n.Add(k) >= c.target.Load() {
		c.once.Do(func() { close(c.done) })
	}
}

// expect sets the target.
func (c *countdown) expect(n int64) {
	c.target.Store(n)
	if c.n.Load() >= n {
		c.once.Do(func() { close(c.done) })
	}
}

// await waits until the target is reached (true), wait passed or ctx ended.
func (c *countdown) await(ctx interface{ Done() <-chan struct{} }, wait time.Duration) bool {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-c.done:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// reasonOf says why s did not settle within the wait.
func reasonOf(s *recoverSub) string {
	if s.conn != nil {
		s.conn.mu.Lock()
		gone := s.conn.gone
		s.conn.mu.Unlock()
		if gone {
			return "closed by the server before its recovery frame"
		}
	}
	return "no recovery frame within --wait"
}

// errNoPosition is a client that never learnt its position on its first connection.
var errNoPosition = fmt.Errorf("no position before the outage: no pusher_internal:recovery after its first subscribe")

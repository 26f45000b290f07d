package cluster

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/herald-rt/herald"
)

// histEntryOverhead is what a kept event costs besides its buffer: the entry and its slot in
// its channel's list.
const histEntryOverhead = int64(unsafe.Sizeof(histEntry{})) + 8

// histEntry is one kept event of a history channel: its position frame and its event frame
// in one buffer, written to subscribers in one piece. Its fields never change once it is in
// its channel's list.
type histEntry struct {
	offset uint64
	at     int64 // engine clock, ms
	buf    []byte
	split  int // buf[split:] is the event's frame
	size   int64
	h      *chanHist
	// The app's list, in write order; guarded by histStore.lmu.
	prev, next *histEntry
	linked     bool
}

// Event returns the entry's event frame.
func (e *histEntry) event() []byte { return e.buf[e.split:] }

// chanHist is one channel's history on this node: its epoch, the offset of the last event
// delivered here, and the events kept, with consecutive offsets ending at last. On a single
// node it is the channel's history; in a cluster it is this node's copy of the history the
// bus's store keeps, loaded when the channel gets its first local subscriber and kept up to
// date, in offset order, by what the bus brings (history_sequence.go).
type chanHist struct {
	mu    sync.Mutex
	name  string
	rule  herald.HistoryRule
	store *histStore
	epoch string
	last  uint64
	ents  []*histEntry // ents[head:] are kept
	head  int
	// hole is the last offset known to be missing from the history (the store lost it, or
	// refused it as forged: a cluster copy's): the events kept are after it, and a recovery
	// from before it fails with ReasonLost rather than replay around it. 0: none.
	hole uint64
	used int64 // engine clock, ms, of the last write (a single node forgets idle histories)
	dead bool  // forgotten: whoever holds it looks it up again

	// In a cluster only: events held back while the missing ones are read (see sequence),
	// and whether the bus's store could not be read when the copy was to be loaded.
	busy        bool
	held        []heldEvent
	unavailable bool
	// ended is the epoch this node ended because the store went back in it (rollbackLocked):
	// the bus's events of that epoch are dropped.
	ended string
	// restarting: the store is being asked for a new epoch (restart); the copy is busy.
	restarting bool
}

// first is the offset of the oldest event kept (last+1 when none is).
func (h *chanHist) firstLocked() uint64 {
	if h.head < len(h.ents) {
		return h.ents[h.head].offset
	}
	return h.last + 1
}

// appendLocked keeps frame as the event with the given offset, the next one, behind its
// position frame (l encodes it), and returns its entry and the entries evicted from the app's
// other channels to stay within its bound, to drop once h is unlocked (histStore.drop).
func (h *chanHist) appendLocked(l Listener, offset uint64, at int64, frame []byte) (e *histEntry, victims []*histEntry) {
	buf := l.AppendPosition(make([]byte, 0, 64+len(h.name)+len(h.epoch)+len(frame)), h.name, herald.Position{Epoch: h.epoch, Offset: offset})
	split := len(buf)
	buf = append(buf, frame...)
	e = &histEntry{offset: offset, at: at, buf: buf, split: split, h: h, size: int64(cap(buf)) + histEntryOverhead}
	h.last, h.used = offset, at
	h.ents = append(h.ents, e)
	for len(h.ents)-h.head > h.rule.Size {
		h.dropHeadLocked()
	}
	h.expireLocked(at)
	victims = h.store.link(e)
	return e, victims
}

// dropHeadLocked forgets the oldest event kept.
func (h *chanHist) dropHeadLocked() {
	e := h.ents[h.head]
	h.ents[h.head] = nil
	h.head++
	h.store.unlink(e)
	if h.head > 32 && h.head > len(h.ents)/2 {
		n := copy(h.ents, h.ents[h.head:])
		clear(h.ents[n:])
		h.ents, h.head = h.ents[:n], 0
	}
}

// expireLocked forgets the events older than the rule's TTL.
func (h *chanHist) expireLocked(now int64) {
	ttl := h.rule.TTL.Milliseconds()
	for h.head < len(h.ents) && now-h.ents[h.head].at >= ttl {
		h.dropHeadLocked()
	}
}

// clearLocked forgets every event kept.
func (h *chanHist) clearLocked() {
	for h.head < len(h.ents) {
		h.dropHeadLocked()
	}
	h.ents, h.head = h.ents[:0], 0
}

// Recovery is what a subscription to a history channel gets after its
// subscription_succeeded: the events it missed, if it asked to recover, and the position the
// live events go on from.
type Recovery struct {
	Latest herald.Position
	// Unknown says the node knows no position to give: its copy of the history could not
	// be read and has had no event since (unavailable). Latest is then the subscription's
	// own position, when it asked to recover, so that it keeps it; otherwise none is given.
	Unknown bool
	// Asked says the subscription asked to recover; then Recovered says whether every
	// event after its position is to be replayed (Frames), and Reason, when not, why.
	Asked     bool
	Recovered bool
	Reason    string
	// ents are the kept events to replay: a view of the history's list, valid only during
	// the call that gives the Recovery.
	ents []*histEntry
}

// Len is how many events the recovery replays.
func (r *Recovery) Len() int { return len(r.ents) }

// Bytes is what the replay sends: each event with its position frame.
func (r *Recovery) Bytes() int {
	n := 0
	for _, e := range r.ents {
		n += len(e.buf)
	}
	return n
}

// Frames returns the events to replay, each its position frame and its event frame in one
// buffer, oldest first: the history's own buffers, never modified, shared by every replay of
// them and valid after the call (the slice is the caller's).
func (r *Recovery) Frames() [][]byte {
	out := make([][]byte, len(r.ents))
	for i, e := range r.ents {
		out[i] = e.buf
	}
	return out
}

// Refuse makes r answer recovered:false with reason, replaying nothing.
func (r *Recovery) Refuse(reason string) { r.Recovered, r.Reason, r.ents = false, reason, nil }

// The reasons a recovery fails (docs/protocol.md).
const (
	ReasonEpochChanged = "epoch_changed"
	ReasonTooOld       = "too_old"
	ReasonAhead        = "ahead"
	ReasonNoHistory    = "no_history"
	ReasonUnavailable  = "unavailable"
	// ReasonLost: an event after the position is missing from the history (an entry the
	// store lost, or one refused as forged or malformed), so not every event can be replayed.
	ReasonLost = "lost"
)

// recoverLocked says what a subscription recovering from since (nil: not recovering) gets.
func (h *chanHist) recoverLocked(since *herald.Position, now int64) Recovery {
	h.expireLocked(now)
	r := Recovery{Latest: herald.Position{Epoch: h.epoch, Offset: h.last}}
	// An unavailable copy that has had no event has no epoch, but the channel may well have
	// one: {"", 0} would be a position (before the channel's first event), and recovering
	// from it later would replay the whole history.
	r.Unknown = h.unavailable && h.epoch == ""
	if since == nil {
		return r
	}
	r.Asked = true
	switch {
	case h.unavailable:
		r.Reason = ReasonUnavailable
		if r.Unknown {
			r.Latest = *since
		}
	case since.Epoch != h.epoch && since.Epoch != "":
		r.Reason = ReasonEpochChanged
	case since.Epoch == "" && since.Offset != 0:
		r.Reason = ReasonEpochChanged
	case since.Epoch != "" && since.Offset > h.last:
		r.Reason = ReasonAhead
	case since.Epoch == "" && h.firstLocked() > 1:
		// A position taken before the channel had a history: every event of this epoch
		// is after it.
		r.Reason = ReasonTooOld
		if h.hole != 0 && h.hole+1 == h.firstLocked() {
			r.Reason = ReasonLost
		}
	case since.Epoch != "" && since.Offset+1 < h.firstLocked():
		r.Reason = ReasonTooOld
		if h.hole != 0 && h.hole+1 == h.firstLocked() {
			r.Reason = ReasonLost // what is missing right after the position was lost, not aged out
		}
	default:
		r.Recovered = true
		from := since.Offset
		if since.Epoch == "" {
			from = 0
		}
		// Offsets are consecutive: the first after from is at from+1-first.
		kept := h.ents[h.head:]
		if i := int64(from+1) - int64(h.firstLocked()); i < int64(len(kept)) {
			r.ents = kept[max(i, 0):]
		}
	}
	return r
}

// histStore is one app's histories on this node, bounded in bytes: past the bound, the
// events written least recently, whatever their channel, are forgotten first. On a single
// node it also holds the histories by name (a cluster node's are its channels').
type histStore struct {
	ruleset atomic.Pointer[[]herald.HistoryRule] // replaced whole (history_rules.go)
	max     int64
	epoch   string // this node's, to which a single node's channels add a generation
	gen     *atomic.Uint64

	mu sync.Mutex
	m  map[string]*chanHist

	lmu  sync.Mutex // the list; a leaf
	list histEntry  // sentinel of the app's list, oldest first after it

	bytes, entries, evictions atomic.Int64
}

func newHistStore(rules []herald.HistoryRule, max int64, epoch string, gen *atomic.Uint64) *histStore {
	s := &histStore{max: max, epoch: epoch, gen: gen, m: map[string]*chanHist{}}
	s.ruleset.Store(&rules)
	s.list.prev, s.list.next = &s.list, &s.list
	return s
}

// rule returns the history rule of channel name, if it has one: cache channels and
// end-to-end encrypted channels have none.
func (s *histStore) rule(name string) (herald.HistoryRule, bool) {
	rules := s.rules()
	if len(rules) == 0 {
		return herald.HistoryRule{}, false
	}
	if info := herald.Classify(name); info.Cache || info.Kind == herald.PrivateEncrypted {
		return herald.HistoryRule{}, false
	}
	for _, r := range rules {
		if r.Matches(name) {
			return r, true
		}
	}
	return herald.HistoryRule{}, false
}

// newHist returns an empty history for channel name under rule.
func (s *histStore) newHist(name string, rule herald.HistoryRule) *chanHist {
	return &chanHist{name: strings.Clone(name), rule: rule, store: s}
}

// get returns channel name's history on a single node, making it (in a new epoch) when it
// has none, locked.
func (s *histStore) get(name string, rule herald.HistoryRule, now int64) *chanHist {
	for {
		s.mu.Lock()
		h := s.m[name]
		if h == nil {
			h = s.newHist(name, rule)
			h.used = now
			h.epoch = s.epoch + "." + formatGen(s.gen.Add(1))
			s.m[h.name] = h
		}
		s.mu.Unlock()
		h.mu.Lock()
		if !h.dead {
			return h
		}
		h.mu.Unlock()
	}
}

// peek returns channel name's history on a single node, locked, or nil when it has none.
func (s *histStore) peek(name string) *chanHist {
	s.mu.Lock()
	h := s.m[name]
	s.mu.Unlock()
	if h == nil {
		return nil
	}
	h.mu.Lock()
	if h.dead {
		h.mu.Unlock()
		return nil
	}
	return h
}

func formatGen(g uint64) string {
	const digits = "0123456789abcdefghijklmnopqrstuvwxyz"
	var b [13]byte
	i := len(b)
	for {
		i--
		b[i] = digits[g%36]
		if g /= 36; g == 0 {
			return string(b[i:])
		}
	}
}

// link puts e at the back of the app's list and counts it, and returns the oldest entries,
// taken off the list, while the app is over its bound.
func (s *histStore) link(e *histEntry) (victims []*histEntry) {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	last := s.list.prev
	e.prev, e.next = last, &s.list
	last.next, s.list.prev = e, e
	e.linked = true
	s.bytes.Add(e.size)
	s.entries.Add(1)
	for s.bytes.Load() > s.max && s.list.next != e {
		v := s.list.next
		s.unlinkLocked(v)
		s.evictions.Add(1)
		victims = append(victims, v)
	}
	return victims
}

func (s *histStore) unlink(e *histEntry) {
	s.lmu.Lock()
	if e.linked {
		s.unlinkLocked(e)
	}
	s.lmu.Unlock()
}

func (s *histStore) unlinkLocked(e *histEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next, e.linked = nil, nil, false
	s.bytes.Add(-e.size)
	s.entries.Add(-1)
}

// drop forgets evicted entries in their channels: each channel's oldest ones, as the list
// is in write order. No history may be locked.
func (s *histStore) drop(victims []*histEntry) {
	for _, v := range victims {
		h := v.h
		h.mu.Lock()
		for h.head < len(h.ents) && h.ents[h.head].offset <= v.offset {
			h.dropHeadLocked()
		}
		h.mu.Unlock()
	}
}

// MetaTTL is how long a single node keeps a channel's epoch and last offset after its last
// event: a day, or the rule's TTL when longer. A channel quiet for longer starts a new epoch,
// as in the Redis store.
func metaTTL(r herald.HistoryRule) int64 { return max(r.TTL, 24*time.Hour).Milliseconds() }

// forgetIdle forgets a single node's histories that keep no event and have had none for
// their metaTTL: a channel that comes back gets a new epoch.
func (s *histStore) forgetIdle(now int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, h := range s.m {
		h.mu.Lock()
		h.expireLocked(now)
		if h.head == len(h.ents) && now-h.used >= metaTTL(h.rule) {
			h.dead = true
			delete(s.m, name)
		}
		h.mu.Unlock()
	}
}

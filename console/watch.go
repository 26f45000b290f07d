package console

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
)

// logKinds are the kinds the debug log shows: everything but subscription counts, which
// the overview shows as numbers.
var logKinds = herald.Activities(herald.ConnectionOpened, herald.ConnectionClosed, herald.Subscribed,
	herald.Unsubscribed, herald.ChannelOccupied, herald.ChannelVacated, herald.MemberAdded, herald.MemberRemoved,
	herald.ClientEvent, herald.APIEvent, herald.CacheMiss, herald.WebhookSent)

const (
	ringSize     = 1024 // entries an app's log keeps for the pages reading it
	maxDataBytes = 512  // event data shown per entry; the rest is cut
)

// entry is one line of the debug log, as the page receives it.
type entry struct {
	Seq      uint64 `json:"seq"`
	Kind     string `json:"kind"`
	TimeMS   int64  `json:"time_ms"`
	Channel  string `json:"channel,omitempty"`
	Event    string `json:"event,omitempty"`
	Data     string `json:"data,omitempty"`
	SocketID string `json:"socket_id,omitempty"`
	UserID   string `json:"user_id,omitempty"`
	Origin   string `json:"origin,omitempty"`
	Count    int    `json:"count,omitempty"`
	Code     int    `json:"code,omitempty"`
}

// watch is one app's observer. While no page watches the app, Wants is 0 and the server sends
// nothing. While pages do, Observe admits at most rate entries a second (a token bucket;
// the rest are counted as sampled out) into a ring that the pages read at their own pace: a
// busy app costs the node one short lock per admitted entry and the pages at most rate
// entries a second, however busy it is.
type watch struct {
	app   string
	wants atomic.Uint32 // logKinds while watchers > 0, else 0

	mu       sync.Mutex
	watchers int     // pages reading the log
	ring     []entry // ringSize entries, from the first page that watches
	seq      uint64  // entries written ever; the next one's Seq
	sampled  uint64  // entries refused by the rate
	tokens   float64
	last     time.Time
	rate     float64 // entries per second, and the bucket's size
}

var _ herald.ActivityObserver = (*watch)(nil)

func newWatch(app string, rate int) *watch {
	return &watch{app: app, rate: float64(rate), tokens: float64(rate)}
}

// Wants is what the server asks before it builds an Activity: 0 while no page watches.
func (w *watch) Wants() herald.ActivitySet { return herald.ActivitySet(w.wants.Load()) }

// Observe admits a within the rate, else counts it out. It never blocks for longer than a
// few field copies under the watch's own lock, and calls nothing.
func (w *watch) Observe(a *herald.Activity) {
	if !logKinds.Has(a.Kind) || w.wants.Load() == 0 {
		return
	}
	now := a.Time
	if now.IsZero() {
		now = time.Now()
	}
	data := a.Data
	if len(data) > maxDataBytes {
		data = data[:maxDataBytes] + "…"
	}
	e := entry{Kind: a.Kind.String(), TimeMS: now.UnixMilli(), Channel: a.Channel, Event: a.Event, Data: data,
		SocketID: a.SocketID, UserID: a.UserID, Origin: a.Origin, Count: a.Count, Code: a.Code}
	w.mu.Lock()
	if el := now.Sub(w.last).Seconds(); el > 0 {
		w.tokens = min(w.rate, w.tokens+el*w.rate)
		w.last = now
	}
	if w.tokens < 1 {
		w.sampled++
		w.mu.Unlock()
		return
	}
	if w.ring == nil {
		w.mu.Unlock()
		return
	}
	w.tokens--
	e.Seq = w.seq
	w.ring[w.seq%ringSize] = e
	w.seq++
	w.mu.Unlock()
}

// attach and detach count the pages watching; the first turns the observer on, the last
// off, and each says whether it did (changed).
func (w *watch) attach() (next uint64, changed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ring == nil {
		w.ring = make([]entry, ringSize)
	}
	w.watchers++
	w.wants.Store(uint32(logKinds))
	return w.seq, w.watchers == 1
}

func (w *watch) detach() (changed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watchers--; w.watchers == 0 {
		w.wants.Store(0)
		return true
	}
	return false
}

// read returns the entries from seq from on (those still in the ring), the seq to read
// from next, how many entries from on the ring had already dropped (a page that fell
// behind), and how many the rate has sampled out since the watch began.
func (w *watch) read(from uint64, out []entry) (_ []entry, next, lost, sampled uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seq > ringSize && from < w.seq-ringSize {
		lost = w.seq - ringSize - from
		from = w.seq - ringSize
	}
	for s := from; s < w.seq; s++ {
		out = append(out, w.ring[s%ringSize])
	}
	return out, w.seq, lost, w.sampled
}

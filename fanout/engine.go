package fanout

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald/internal/lograte"
)

// Config tunes an Engine. Zero values mean the defaults noted, except the frames, which the
// protocol above must give.
type Config struct {
	Workers             int           // fan-out workers; default GOMAXPROCS
	ActivityTimeout     time.Duration // a connection silent this long is sent Ping; default 120s
	PongTimeout         time.Duration // closed with PongLost when it stays silent this long after; default 30s
	OutboundBufferBytes int           // queued bytes per connection before it is closed with Slow; default 1 MiB
	PublishTimeout      time.Duration // how long Reserve waits for full worker queues; default 1s
	CloseGrace          time.Duration // how long a close frame may take to leave; default 2s
	SweepInterval       time.Duration // how often workers check timeouts; default 1s
	InboxSize           int           // commands queued per worker; default 8192
	// WriteDelay is the longest a busy worker holds the frames of a connection it wrote
	// very recently, so that a burst leaves in one write (coalesce.go); default 2ms,
	// negative: never hold.
	WriteDelay time.Duration

	Ping     []byte // the frame sent to a silent connection
	Slow     Close  // how a slow consumer is closed
	PongLost Close  // how a connection that did not answer Ping is closed
}

// DefaultWriteDelay is Config.WriteDelay's default.
const DefaultWriteDelay = 2 * time.Millisecond

// Close is how the engine closes a connection of its own accord: the close code recorded
// (Conn.CloseCode) and the frames written last (an error and a close frame).
type Close struct {
	Code  int
	Frame []byte
}

func (c Config) withDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if c.Workers <= 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	def(&c.ActivityTimeout, 120*time.Second)
	def(&c.PongTimeout, 30*time.Second)
	def(&c.PublishTimeout, time.Second)
	def(&c.CloseGrace, 2*time.Second)
	def(&c.SweepInterval, time.Second)
	switch {
	case c.WriteDelay == 0:
		c.WriteDelay = DefaultWriteDelay
	case c.WriteDelay < 0:
		c.WriteDelay = 0
	}
	if c.OutboundBufferBytes <= 0 {
		c.OutboundBufferBytes = 1 << 20
	}
	if c.InboxSize <= 0 {
		c.InboxSize = 8192
	}
	return c
}

// Engine is one node's fan-out: its workers and its connections.
type Engine struct {
	cfg     Config
	log     *slog.Logger
	workers []*worker
	prefix  string // socket id prefix, random per process
	nextNum atomic.Uint64

	groupsMu sync.Mutex               // serializes NewGroup's copy of groups
	groups   atomic.Pointer[[]*Group] // copied on write: workers read it without a lock

	conns    atomic.Int64
	draining atomic.Bool
	drain    Close // set by Drain before its opCloseAll
	drained  chan struct{}
	drainOne sync.Once

	pongTimeouts atomic.Int64
	slowWarn     lograte.Limit // slow-consumer warnings
	pongUnread   atomic.Int64  // missed pongs forgiven: the client's bytes were in the kernel, unread
	pongWarn     lograte.Limit // pong-timeout warnings

	syncMu sync.Mutex
	syncs  []*Conn // one per worker, for Sync

	stop    chan struct{}
	stopped sync.Once
	wg      sync.WaitGroup
}

// New builds an engine and starts its workers; Stop stops them.
func New(cfg Config, log *slog.Logger) *Engine {
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	e := &Engine{
		cfg:     cfg,
		log:     log,
		prefix:  strconv.FormatUint(uint64(binary.LittleEndian.Uint32(rnd[:])%1_000_000_000), 10),
		drained: make(chan struct{}),
		stop:    make(chan struct{}),
	}
	for i := 0; i < cfg.Workers; i++ {
		w := newWorker(e, i)
		e.workers = append(e.workers, w)
		e.wg.Add(1)
		go func() { defer e.wg.Done(); w.run(e.stop) }()
	}
	return e
}

// NewGroup returns a new group of connections (an app's), whose publishes observe lat.
func (e *Engine) NewGroup(id string, lat Latencies) *Group {
	g := &Group{id: id, counters: make([]Counters, len(e.workers)), lat: lat}
	for i := range g.counters {
		g.counters[i].g = g
	}
	e.groupsMu.Lock()
	var list []*Group
	if old := e.groups.Load(); old != nil {
		list = *old
	}
	// Appended in place while there is room: a reader's slice ends before the element
	// written, and elements are never overwritten, so readers need no copy; copying the list
	// for each group made adding 10,000 apps quadratic (0.7 s).
	list = append(list, g)
	e.groups.Store(&list)
	e.groupsMu.Unlock()
	return g
}

// Stop stops the workers, without closing connections (see Drain). It is idempotent.
func (e *Engine) Stop() {
	e.stopped.Do(func() { close(e.stop) })
	e.wg.Wait()
}

// Now is the engine's clock: Unix milliseconds. It reads the time when called (a few tens of
// nanoseconds through the vDSO) instead of a clock advanced by a ticker, which woke an idle
// node ten times a second; nothing calls it per recipient.
func (e *Engine) Now() int64 { return time.Now().UnixMilli() }

// Workers returns the number of fan-out workers.
func (e *Engine) Workers() int { return len(e.workers) }

// QueueDepths returns how many commands wait in each worker's inbox.
func (e *Engine) QueueDepths() []int {
	out := make([]int, len(e.workers))
	for i, w := range e.workers {
		out[i] = len(w.inbox)
	}
	return out
}

// Fill returns how full the fullest worker's queue is, from 0 to 1: commands waiting in its
// inbox over the inbox's size. It allocates nothing.
func (e *Engine) Fill() float64 {
	most := 0.0
	for _, w := range e.workers {
		most = max(most, float64(len(w.inbox))/float64(cap(w.inbox)))
	}
	return most
}

// HeldSlots returns how many queue slots publishers hold in each worker (Reserve): 0 in
// every worker once the publishes are handled.
func (e *Engine) HeldSlots() []int {
	out := make([]int, len(e.workers))
	for i, w := range e.workers {
		out[i] = len(w.slots)
	}
	return out
}

// Conns is how many connections are claimed and not yet gone.
func (e *Engine) Conns() int64 { return e.conns.Load() }

// PongTimeouts is how many connections were closed for not answering a ping.
func (e *Engine) PongTimeouts() int64 { return e.pongTimeouts.Load() }

// PongsUnread is how many times a connection's pong timeout passed while the client had
// sent bytes the node had not read yet: the connection was kept and waited for again.
func (e *Engine) PongsUnread() int64 { return e.pongUnread.Load() }

// SlowConsumers sums every group's slow-consumer closes.
func (e *Engine) SlowConsumers() int64 {
	list := e.groups.Load()
	if list == nil {
		return 0
	}
	var n int64
	for _, g := range *list {
		for i := range g.counters {
			n += g.counters[i].Slow.Load()
		}
	}
	return n
}

// Claim counts one more connection, before it is attached, and returns the count: the
// caller refuses it (Unclaim) when over its limit.
func (e *Engine) Claim() int64 { return e.conns.Add(1) }

// Unclaim undoes Claim (and g's, when g is not nil) for a connection that never reached a
// worker. Like a hang-up, it ends Drain's wait when the count reaches zero.
func (e *Engine) Unclaim(g *Group) {
	if g != nil {
		g.conns.Add(-1)
	}
	e.release()
}

func (e *Engine) release() {
	if e.conns.Add(-1) == 0 && e.draining.Load() {
		e.drainOne.Do(func() { close(e.drained) })
	}
}

// uncount is the single place an attached connection stops counting.
func (e *Engine) uncount(c *Conn) {
	c.m.g.conns.Add(-1)
	c.m.Disconnects.Add(1)
	e.release()
}

// Draining reports whether Drain has begun: new connections are to be refused.
func (e *Engine) Draining() bool { return e.draining.Load() }

// Drain closes every connection with d and waits, within ctx, until they have all gone.
// Connections attached after it began are closed with d as well (Attach). Call it once.
func (e *Engine) Drain(ctx context.Context, d Close) error {
	e.drain = d
	e.draining.Store(true)
	if e.conns.Load() == 0 {
		e.drainOne.Do(func() { close(e.drained) })
	}
	for _, w := range e.workers {
		w.inbox <- cmd{op: opCloseAll}
	}
	select {
	case <-e.drained:
		return nil
	case <-ctx.Done():
		return errors.New("fanout: connections still open at the shutdown deadline")
	}
}

// warnSlow logs slow consumers, at most once a second.
func (e *Engine) warnSlow(c *Conn) {
	if e.slowWarn.Due(e.Now(), 1000) {
		e.log.Warn("closing slow consumer", "app_id", c.m.g.id, "socket_id", c.ID(),
			"slow_consumers_total", e.SlowConsumers())
	}
}

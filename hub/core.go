package hub

import (
	"crypto/rand"
	"encoding/binary"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/guard"
	"github.com/herald-rt/herald/internal/lograte"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/ws"
)

// core is the fan-out core of a node: the workers that own the connections' outbound queues
// and writes, each channel's subscribers, the cache of cache channels, publishing (local or
// through the cluster bus, see cluster.go) and the connection count. The session side (Hub)
// decides who subscribes to what; the core delivers. It calls nothing of the session side.
type core struct {
	cfg     Config
	log     *slog.Logger
	apps    map[string]*appState // by id
	workers []*worker
	prefix  string // socket id prefix, random per process
	cache   *cacheNode
	bus     herald.Broker // nil: a single node
	busOps  *busOps       // the bus operations in flight; nil on a single node
	state   *clusterState // the other nodes' shares of the state; nil on a single node
	echo    echoes        // cache-channel publishes waiting for the bus to bring them back
	// terminate closes a user's connections here (the session side's, for BusTerminate).
	terminate func(app, user string)
	subCounts *subCounts // channels due a subscription count event; nil unless an app sends them

	clock    atomic.Int64 // ms, advanced by the clock goroutine
	conns    atomic.Int64
	channels atomic.Int64
	draining atomic.Bool
	drained  chan struct{}
	drainOne sync.Once

	pongTimeouts atomic.Int64
	slowWarn     lograte.Limit // slow-consumer warnings

	// Pre-encoded frames.
	pingFrame            []byte
	closeSlow, closePong []byte
	closeShutdown        []byte

	fences []*Conn // tests only: see fence in fake_test.go

	stop chan struct{}
	wg   sync.WaitGroup
}

// appState is the hub's live state of one app: the core's part (channels, cache, counters,
// latency) and the session side's (origins, client-event rate, signed-in users).
type appState struct {
	app      *herald.App
	channels *registry
	cache    *cache
	conns    atomic.Int64
	counters []counters // by worker
	origins  guard.Origins
	events   guard.Rate // each connection's client-event rate
	lat      latencies  // what its publishes observe
	usersMu  sync.Mutex
	users    map[string][]*Conn // signed-in user id -> connections
	obs      observers          // activity observers (activity.go)

	// Watchlists (watchlist.go), under usersMu.
	watchers    map[string][]*Conn // user id -> the connections watching it
	remoteUsers map[string]int     // user id -> the other nodes where it is signed in
}

func newCore(cfg Config, log *slog.Logger) *core {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	f := &core{
		cfg:     cfg,
		log:     log,
		apps:    map[string]*appState{},
		prefix:  strconv.FormatUint(uint64(binary.LittleEndian.Uint32(rnd[:])%1_000_000_000), 10),
		drained: make(chan struct{}),
		stop:    make(chan struct{}),
		cache:   newCacheNode(cfg),
	}
	f.pingFrame = ws.TextFrame(pusher.PingPayload)
	f.closeSlow = closeFrames(herald.CodeSlowConsumer.PusherCode(), "slow consumer: too many bytes queued")
	f.closePong = closeFrames(herald.CodePongTimeout.PusherCode(), "pong reply not received in time")
	f.closeShutdown = closeFrames(herald.CodeReconnect.PusherCode(), "server shutting down, reconnect")
	f.clock.Store(time.Now().UnixMilli())
	return f
}

// start starts the workers and the clock.
func (f *core) start() {
	for i := 0; i < f.cfg.Workers; i++ {
		w := newWorker(f, i)
		f.workers = append(f.workers, w)
		f.wg.Add(1)
		go func() { defer f.wg.Done(); w.run(f.stop) }()
	}
	f.wg.Add(1)
	go f.tick()
	f.startSubCounts()
}

// stopAll stops the bus operations in flight, the workers and the clock.
func (f *core) stopAll() {
	f.busOps.stop()
	close(f.stop)
	f.wg.Wait()
}

// tick advances the coarse clock (nothing on the hot path calls time.Now) and expires cache
// entries.
func (f *core) tick() {
	defer f.wg.Done()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	n := 0
	for {
		select {
		case now := <-t.C:
			ms := now.UnixMilli()
			f.clock.Store(ms)
			if n++; n%10 == 0 {
				f.cache.expire(ms)
			}
			if n%600 == 0 {
				f.cache.compact()
			}
		case <-f.stop:
			return
		}
	}
}

func (f *core) now() int64 { return f.clock.Load() }

// uncount is the single place a connection stops counting.
func (f *core) uncount(c *Conn) {
	c.app.conns.Add(-1)
	c.m.disconnects.Add(1)
	if f.conns.Add(-1) == 0 && f.draining.Load() {
		f.drainOne.Do(func() { close(f.drained) })
	}
}

// warnSlow logs slow consumers, at most once a second.
func (f *core) warnSlow(c *Conn) {
	if f.slowWarn.Due(f.now(), 1000) {
		f.log.Warn("closing slow consumer", "app_id", c.app.app.ID, "socket_id", c.sid,
			"slow_consumers_total", f.slowConsumerCount())
	}
}

// slowConsumerCount sums every app's slow-consumer closes.
func (f *core) slowConsumerCount() int64 {
	var n int64
	for _, a := range f.apps {
		for i := range a.counters {
			n += a.counters[i].slow.Load()
		}
	}
	return n
}

// Workers returns the number of fan-out workers.
func (f *core) Workers() int { return len(f.workers) }

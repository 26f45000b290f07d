package cluster

import (
	"context"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/fanout"
)

// State is what the Pusher session needs of the other nodes: the node's channels and their
// cluster-wide counts, presence members, signed-in users, the last events of cache channels,
// and publishing. NewLocal (a single node) and NewReplicated (a cluster node on a bus)
// implement it, and both pass the conformance suite in cluster/statetest.
//
// Methods taking an *App take one this State returned from AddApp. Channels are those of
// Acquire: a *Channel is live until the Release that reports it last. What both States do
// alike (a channel's lookup, presence joins and leaves, the cache) are methods of App, whose
// part in the cluster (the records the other nodes get) its State supplies: an interface
// call would make their callbacks escape, and every subscription allocate twice more.
type State interface {
	// AddApp registers an app whose connections are the engine group g and whose history
	// channels are those of rules, and returns its part of the state. Call it for every app
	// known at start before Start, and for an app created later when the node learns of it;
	// at most once per app id.
	AddApp(id string, g *fanout.Group, rules []herald.HistoryRule) *App
	// Start begins serving: from then on l is told of what the other nodes change.
	Start(l Listener)
	// Stop tells the other nodes this one leaves and stops the state's goroutines, within
	// ctx. Call it once the node's connections are gone; it is idempotent.
	Stop(ctx context.Context)

	// Acquire counts one more local subscription to channel name, creating the channel for
	// its first one (first). The caller reports the count's change with Counted. A new
	// channel's Gate opens once the other nodes' events for it will reach this one.
	Acquire(a *App, name string, info herald.ChannelInfo) (ch *Channel, first bool)
	// Release counts one local subscription less; last reports that it was the channel's
	// last, and the channel is gone.
	Release(a *App, ch *Channel) (last bool)
	// Counted follows a change of the local subscription count of channel name: edge says it
	// went to or from zero, reported whether the session reported that edge's activity.
	Counted(a *App, name string, edge, reported bool)
	// RemoteSubs is the other nodes' subscription count of channel name.
	RemoteSubs(a *App, name string) int
	// Channels lists the channels occupied on any node whose names start with prefix, with
	// the cluster's counts; Channel reports one (occupied: it has subscribers anywhere).
	Channels(a *App, prefix string) []herald.ChannelStat
	Channel(a *App, name string) (st herald.ChannelStat, occupied bool)

	// CatchUp reports whether ch's history on this node is behind since, a client's position
	// in the same epoch (a cluster node whose copy has not yet received the client's last
	// events: cut off from its bus, or catching up after a failure), and then calls enter,
	// from a goroutine of the node, once the copy has caught up with since, or the history
	// store shows it cannot (the store's history ends before since, or is another epoch), or
	// the wait is over (Config.CatchUpWait; then caughtUp is false, and the subscription is not to
	// be answered: its client tries again). A subscription entered before that would be
	// handed back a position below its own, and the events between again. False: enter at
	// once.
	CatchUp(a *App, ch *Channel, since *herald.Position, enter func(caughtUp bool)) bool

	// SignedIn follows a user's first connection signing in here (in) and its last leaving.
	SignedIn(a *App, user string, in bool)

	// Publish delivers ev, encoded as frame, to the subscribers of its channel on every node,
	// except the connection named by its SocketID; a cache channel keeps it. An error with
	// code CodeBusy (the fan-out queues stayed full) or CodeUnavailable (the bus) means it was
	// delivered to nobody. (The event travels by value: through an interface, a slice would
	// escape, and every publish allocate twice more.)
	Publish(a *App, ev herald.Event, frame []byte) error
	// PublishBatch is Publish for several events, frames[i] encoding evs[i]. On a single
	// node it is all or nothing; on a bus, the events before a failure may have been
	// delivered.
	PublishBatch(a *App, evs []herald.Event, frames [][]byte) error
	// Forward delivers a client event's frame to the other subscribers of channel on every
	// node. It is never refused: without the bus, it reaches this node's subscribers.
	Forward(a *App, channel string, from *fanout.Conn, frame []byte)
	// History reads history channel's events after offset `after`, at most limit of them, and
	// its latest position; an error with code CodeNotFound when the channel keeps no history.
	History(ctx context.Context, a *App, channel string, after uint64, limit int) (herald.HistoryPage, error)
	// HistoryStats returns what the node's copies of histories met (all zero on a single node).
	HistoryStats() *HistoryStats
	// KeyStats returns the node's counters of idempotency keys.
	KeyStats() KeyStats
	// Terminate asks the other nodes to close the connections signed in as user (the
	// session closes its own).
	Terminate(a *App, user string)
}

// Listener is how a State tells the session what the other nodes change. Its methods are
// called from the state's goroutines, some holding the state's locks (see each): they must
// return soon and call nothing of the State.
type Listener interface {
	// Wants reports whether the app's activity observers want kind k.
	Wants(app string, k herald.ActivityKind) bool
	// Emit reports an activity no node reported: a change another node's record revealed.
	Emit(app string, act *herald.Activity)
	// CountChanged follows a change of channel's count on another node.
	CountChanged(app, channel string)
	// MemberAdded and MemberRemoved tell the local subscribers of presence channel ch that a
	// user became or stopped being a member on some node; called holding ch's presence lock.
	MemberAdded(app string, ch *Channel, m herald.Member)
	MemberRemoved(app string, ch *Channel, user string)
	// RemoteUser counts one other node more (present) or less where user is signed in.
	RemoteUser(app, user string, present bool)
	// Terminate closes this node's connections signed in as user.
	Terminate(app, user string)

	// AppendPosition appends to dst the frame that tells a subscriber of channel the
	// position of the event that follows it (pusher_internal:position).
	AppendPosition(dst []byte, channel string, p herald.Position) []byte
	// Lost closes this node's connections subscribed to ch: events of its history were
	// lost before they reached this node, and are gone from the history too. Called holding
	// the channel's history.
	Lost(app string, ch *Channel)
	// Missed closes this node's connections subscribed to ch, a channel without history:
	// this node dropped some of its events from the bus (it could not keep up), so they
	// must be told rather than miss them silently.
	Missed(app string, ch *Channel)
}

// Config tunes a State. Zero values mean the defaults noted.
type Config struct {
	// The last events of cache channels, kept for CacheTTL, are bounded in bytes (frames,
	// names and bookkeeping) per app and per node; past a bound the least recently written
	// are evicted and their channels answer pusher:cache_miss again.
	CacheMaxBytes       int           // node; default 64 MiB
	CacheMaxBytesPerApp int           // each app; default a quarter of CacheMaxBytes
	CacheTTL            time.Duration // default 30 min, as Pusher

	// The events history channels keep on this node (a single node's history, a cluster
	// node's copies of its channels' histories) are bounded in bytes per app: past it, the
	// least recently written are forgotten first, and recoveries from before them fail.
	HistoryMaxBytesPerApp int // default 64 MiB
	// HistoryLinger is how long a cluster node keeps a history channel's copy of its
	// history, and its interest in the channel on the bus, after the channel's last local
	// subscriber left: a subscription meanwhile finds it as it was, and costs the bus's
	// store nothing. Default 1 min; negative: not at all.
	HistoryLinger time.Duration

	// CatchUpWait bounds how long a recovering subscription waits for this node's copy of
	// the channel's history to reach the client's position (Replicated.CatchUp). Default
	// CatchUpFor.
	CatchUpWait time.Duration

	// PublishTimeout bounds a publish: its wait for room in the fan-out queues, for the bus
	// and for its cache events to come back from it. Default 1s.
	PublishTimeout time.Duration

	// KeyWindow is how long the node remembers the idempotency keys (herald.Event.Key) of
	// the events it published, and MaxKeys how many at most (past it the oldest are
	// forgotten early, counted in KeyStats.Evicted). Defaults herald.DefaultKeyWindow and
	// DefaultMaxKeys. A replicated node's history store keeps the keys of history channels
	// across nodes by itself, for its engine's window.
	KeyWindow time.Duration
	MaxKeys   int

	// A replicated node announces its share of the state with a heartbeat every Heartbeat
	// (default 2s); a node not heard from for NodeTimeout (default 10s) while this one has
	// had its bus is dead, and its share is dropped (member_removed for its members).
	Heartbeat   time.Duration
	NodeTimeout time.Duration

	// ValidFrame, when set, checks each event frame a replicated node receives from the bus
	// (BusEvent, BusCache) or reads from its history store before the node queues it for
	// its subscribers: the frames are written to their sockets byte for byte, so anything but
	// one well-formed text frame (a close frame, several frames, a broken header) must not
	// pass. What it refuses is dropped; it counts them itself. nil: every frame passes.
	ValidFrame func(frame []byte) bool

	// Release is the herald version the node runs, announced to the other nodes in its state
	// stream (Replicated.Nodes).
	Release string
	// NoBundles stops a replicated node sending bundles (herald.BusBundle), which it sends by
	// default while every live node reads them; it still reads them.
	NoBundles bool
}

func (c Config) withDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if c.CacheMaxBytes <= 0 {
		c.CacheMaxBytes = 64 << 20
	}
	if c.HistoryMaxBytesPerApp <= 0 {
		c.HistoryMaxBytesPerApp = 64 << 20
	}
	if c.CacheMaxBytesPerApp <= 0 {
		c.CacheMaxBytesPerApp = c.CacheMaxBytes / 4
	}
	def(&c.CacheTTL, 30*time.Minute)
	if c.HistoryLinger == 0 {
		c.HistoryLinger = time.Minute
	}
	def(&c.PublishTimeout, time.Second)
	def(&c.CatchUpWait, CatchUpFor)
	def(&c.KeyWindow, herald.DefaultKeyWindow)
	if c.MaxKeys <= 0 {
		c.MaxKeys = DefaultMaxKeys
	}
	def(&c.Heartbeat, 2*time.Second)
	def(&c.NodeTimeout, 10*time.Second)
	return c
}

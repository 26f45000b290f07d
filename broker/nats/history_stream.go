package nats

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// streamKey names the stream of an app's channels under one rule.
type streamKey struct {
	app  string
	rule herald.HistoryRule
}

// streamID is the token that names k's stream and its subjects: a hash of the broker's prefix,
// the app and the rule's glob (not its Size or TTL, which an update of the stream changes).
func (h *History) streamID(k streamKey) string {
	sum := sha256.Sum256([]byte(h.b.cfg.Prefix + "\x00" + k.app + "\x00" + k.rule.Channels))
	return hex.EncodeToString(sum[:12])
}

// streamName is k's stream: HERALD_HISTORY_ and streamID. Its subjects are
// "<prefix>.history.<streamID>.<channel>", the channel escaped into one token as in
// broker.Subject: one token more than the bus's own subjects, so the stream never captures
// those.
func (h *History) streamName(k streamKey) string { return "HERALD_HISTORY_" + h.streamID(k) }

func (h *History) subject(k streamKey, channel string) string {
	return h.subjects(k) + "." + broker.Token(channel)
}

// subjects is the start of the subjects of k's stream.
func (h *History) subjects(k streamKey) string { return h.b.cfg.Prefix + ".history." + h.streamID(k) }

// stream returns k's stream, from this History's cache or else from JetStream; with create it
// creates the stream, or updates it to the rule, first. Without create a missing stream is
// nil and no error.
func (h *History) stream(ctx context.Context, k streamKey, create bool) (jetstream.Stream, error) {
	h.mu.Lock()
	s := h.streams[k]
	h.mu.Unlock()
	if s != nil {
		return s, nil
	}
	if create {
		return h.created(ctx, k)
	}
	var err error
	if s, err = retry(ctx, func(ctx context.Context) (jetstream.Stream, error) {
		return h.js.Stream(ctx, h.streamName(k))
	}); errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, h.classify(k, err)
	}
	h.mu.Lock()
	h.streams[k] = s
	h.mu.Unlock()
	return s, nil
}

// classify is the error of a stream's creation or lookup that failed with err.
func (h *History) classify(k streamKey, err error) error {
	if errors.Is(err, nats.ErrNoResponders) {
		return herald.Errorf(herald.CodeUnavailable, "stream %s: the NATS server does not run JetStream (nats-server -js)", h.streamName(k))
	}
	if e := (*jetstream.APIError)(nil); errors.As(err, &e) && (e.ErrorCode == errInsufficientResources || e.ErrorCode == errReplicasNotSupported) {
		return herald.Errorf(herald.CodeUnavailable, "stream %s: JetStream cannot place %d replicas now (%s): fewer JetStream servers running or clustered (history.replicas)",
			h.streamName(k), h.replicas(), e.Description)
	}
	return unavailable(fmt.Errorf("stream %s: %w", h.streamName(k), err))
}

// creation is one stream's creation in flight: done is closed when it ends, with s or err.
type creation struct {
	done  chan struct{}
	s     jetstream.Stream
	err   error
	began time.Time
	last  error // the last attempt's error, under History.mu
}

// createFor bounds one creation: its attempts, each bounded by the broker's Timeout, with
// pauses between them, until it succeeds, fails for a reason waiting does not mend, or this
// long has passed. JetStream answers a creation within milliseconds when its meta leader is
// elected; without one (servers lost, a cluster forming) it does not answer at all.
const createFor = 30 * time.Second

// created returns k's stream, creating it (or updating it to the rule) first. One creation
// per stream is in flight at a time, in the background, whatever the number of publishes
// that need it: a JetStream without a meta leader is not asked again by each of them. A
// caller waits for it up to ctx, then fails with a CodeUnavailable error that says how long
// the creation has waited; the creation goes on for the next publishes.
func (h *History) created(ctx context.Context, k streamKey) (jetstream.Stream, error) {
	h.mu.Lock()
	if s := h.streams[k]; s != nil {
		h.mu.Unlock()
		return s, nil
	}
	c := h.creating[k]
	if c == nil {
		c = &creation{done: make(chan struct{}), began: time.Now()}
		h.creating[k] = c
		go h.create(k, c)
	}
	h.mu.Unlock()
	select {
	case <-c.done:
		return c.s, c.err
	case <-ctx.Done():
		h.mu.Lock()
		last := c.last
		h.mu.Unlock()
		why := "no answer yet"
		if last != nil {
			why = "last answer: " + herald.MessageOf(last)
		}
		return nil, herald.Errorf(herald.CodeUnavailable, "stream %s: JetStream has not created it in %v (%s; its meta leader may be lost or being elected; the creation goes on): retry later",
			h.streamName(k), time.Since(c.began).Round(time.Millisecond), why)
	}
}

// create runs c, k's creation: attempts until one succeeds or fails for good, or createFor
// has passed, or the broker is closed.
func (h *History) create(k streamKey, c *creation) {
	defer func() {
		h.mu.Lock()
		if c.err == nil {
			h.streams[k] = c.s
		}
		delete(h.creating, k)
		h.mu.Unlock()
		close(c.done)
	}()
	deadline := c.began.Add(createFor)
	for n := 0; ; n++ {
		ctx, cancel := context.WithTimeout(context.Background(), h.b.cfg.Timeout)
		s, err := h.createStream(ctx, k)
		cancel()
		if err == nil {
			c.s, c.err = s, nil
			return
		}
		c.err = h.classify(k, err)
		h.mu.Lock()
		c.last = c.err
		h.mu.Unlock()
		// Again, unless JetStream is off or refuses the configuration itself.
		var api *jetstream.APIError
		final := errors.Is(err, nats.ErrNoResponders) || errors.As(err, &api) && api.Code == 400 && api.ErrorCode != errReplicasNotSupported
		if final || h.b.closed.Load() || time.Now().After(deadline) {
			return
		}
		time.Sleep(min(100*time.Millisecond<<min(n, 4), time.Second))
	}
}

func (h *History) createStream(ctx context.Context, k streamKey) (jetstream.Stream, error) {
	cfg := jetstream.StreamConfig{
		Name:              h.streamName(k),
		Description:       fmt.Sprintf("herald history: app %q, channels %q", k.app, k.rule.Channels),
		Subjects:          []string{h.subjects(k) + ".*"},
		Storage:           jetstream.FileStorage,
		Replicas:          h.replicas(),
		MaxMsgsPerSubject: int64(k.rule.Size),
		MaxAge:            k.rule.TTL,
		Duplicates:        h.dupWindow(k.rule),
		Discard:           jetstream.DiscardOld,
		// Not AllowDirect: a direct get from a stream that was deleted goes unanswered
		// until its timeout (nats-server 2.9), where a get through the API says at once
		// that the stream is gone.
	}
	// A stream that is as wanted is used as it is: an update, even to the same
	// configuration, leaves a replicated stream unable to answer reads for seconds (seen with
	// nats-server 2.9.10) and costs the meta leader a round.
	if s, err := h.js.Stream(ctx, cfg.Name); err == nil && sameStream(s.CachedInfo().Config, cfg) {
		return s, nil
	}
	s, err := h.js.CreateOrUpdateStream(ctx, cfg)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) { // another node created it meanwhile
		s, err = h.js.UpdateStream(ctx, cfg)
	}
	return s, err
}

// forget drops s, k's stream, from the cache: it is gone, and the next use looks again.
func (h *History) forget(k streamKey, s jetstream.Stream) {
	h.mu.Lock()
	if h.streams[k] == s {
		delete(h.streams, k)
	}
	h.mu.Unlock()
}

// The JetStream errors of a stream that cannot have the replicas asked for: not enough
// servers with JetStream are up, or the server is not clustered.
const (
	errInsufficientResources jetstream.ErrorCode = 10023
	errReplicasNotSupported  jetstream.ErrorCode = 10074
)

// replicas is the replicas of the streams this History creates: the broker's
// HistoryReplicas, 1 when 0.
func (h *History) replicas() int { return max(h.b.cfg.HistoryReplicas, 1) }

// dupWindow is how long a stream under rule remembers its events' IDs: the idempotency keys
// of the events that have one (keyID) and, in a replicated stream, the positions of the others
// (offsetID). It is the broker's KeyWindow, at most half the rule's TTL, so that the IDs of a
// channel's events are forgotten before the channel can have none left and start again at
// offset 1 (an ID has no epoch), and at least JetStream's least, 100 ms (and at most the TTL).
// A replicated stream keeps them at most maxDupWindow: every event of it has an ID, which
// every server of the stream keeps in memory for the window, and its publishes race each other
// in flight the longer the window (seen with nats-server 2.11: TestClusterHistoryRaceR3Newer).
func (h *History) dupWindow(rule herald.HistoryRule) time.Duration {
	w := min(h.b.cfg.KeyWindow, rule.TTL/2)
	if h.replicas() > 1 {
		w = min(w, maxDupWindow)
	}
	return min(max(w, 100*time.Millisecond), rule.TTL)
}

// maxDupWindow bounds dupWindow on a replicated stream.
const maxDupWindow = 30 * time.Second

// sameStream reports whether a stream configured as have is what want asks for (its
// duplicate window only when want sets one).
func sameStream(have, want jetstream.StreamConfig) bool {
	return slices.Equal(have.Subjects, want.Subjects) && have.Storage == want.Storage && have.Replicas == want.Replicas &&
		have.MaxMsgsPerSubject == want.MaxMsgsPerSubject && have.MaxAge == want.MaxAge && have.Discard == want.Discard &&
		(want.Duplicates == 0 || have.Duplicates == want.Duplicates)
}

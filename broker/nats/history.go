package nats

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

var _ herald.History = (*History)(nil)

// History is one node's herald.History on NATS JetStream, beside its Broker and on its
// connection (NewHistory). The events of an app's channels under one rule are one stream
// (streamName: the prefix, app and rule's glob hashed), created or updated on this History's
// first publish under the rule: a subject per channel, MaxMsgsPerSubject the rule's Size,
// MaxAge its TTL, file storage, Replicas from the broker's Config. (A stream already as
// wanted is used as it is.)
//
// JetStream numbers a stream's messages, not a channel's, so Publish gives the offset
// itself, with optimistic concurrency: it stores the event with headers Herald-Offset (the
// channel's last offset plus one) and Herald-Epoch, on the condition that the channel's last
// message is still the one it knows (Nats-Expected-Last-Subject-Sequence); when another
// node got there first it reads the channel's last message again and retries. This node's
// publishes of one channel wait for one another; publishes of different channels do not.
// Offsets are so given once per channel, without gaps, whichever node publishes. On a
// stream of one replica that is all. A replicated stream of nats-server 2.9.10 (Debian's)
// checks the expectation against what it has stored only, not against the publishes it is
// still storing, so two nodes' publishes to one channel at the same moment could both be
// stored with one offset (six nodes publishing to one channel were given about a third of
// their offsets twice: TestClusterHistoryRaceR3). So on a replicated stream each event also
// carries its channel and offset as its message ID (Nats-Msg-Id, offsetID): JetStream
// stores the first message of an ID and acknowledges a later one within the stream's
// duplicate window (dupWindow) as a duplicate, deciding in the order of the stream's log on
// every server alike, across elections too; the node whose publish was a duplicate reads
// the channel's last message again and retries. nats-server 2.11 and later also refuse a
// publish while another of its channel (or its ID) is in flight, or while a new leader has
// not applied what it was given: such a publish is made again, as it was, after a random
// pause of up to a few milliseconds (inFlight). A
// channel's epoch is carried by each of its messages: made (at random) by the publish that
// finds no message of the channel left, and read from the last message by every later one.
// (It is the channel's, not the stream's: an epoch of the stream, such as one derived from
// its creation time, would stay the same when a channel's events have all expired and its
// offsets start again at 1.)
// A stream deleted or recreated, or a channel whose every event expired, so starts a new
// epoch, and Read finds no history (the zero Latest) until then and creates none. (A node
// reads the channel's last message again after its connection came back, in case the server
// lost the stream; a stream deleted and recreated by another node meanwhile is noticed by
// the first publish whose expected sequence it refuses, which is every one unless the new
// stream has reached that same sequence for the channel.)
//
// Once JetStream has acknowledged the event, Publish publishes the bus message with its
// position through the Broker (core NATS). Each node's own publishes of a channel reach
// every receiver in offset order; two nodes' publishes of one channel may reach a receiver
// out of offset order (or one may be lost: core NATS is at most once), which receivers
// repair from Read. An error after the acknowledgement comes with the position given: the
// event is kept but was not published.
//
// What is lost when: an event past Size at once, one older than TTL when JetStream expires
// it (Read never returns it after TTL, by the node's clock against JetStream's timestamps),
// all of a channel's with its stream, all of a channel's when a cluster node ends its epoch
// because JetStream went back within it (Restart).
//
// A History is safe for concurrent use.
type History struct {
	b  *Broker
	js jetstream.JetStream

	mu      sync.Mutex
	streams map[streamKey]jetstream.Stream // the streams this History found or made
	// creating is the creations in flight (created), one per stream.
	creating map[streamKey]*creation
	chans    broker.ChannelLocks[chanState]
}

// The headers of a stored event.
const (
	epochHeader  = "Herald-Epoch"
	offsetHeader = "Herald-Offset"
	atHeader     = "Herald-At" // when the node stored it, Unix milliseconds (storedAt)
)

// maxChanStates bounds the channels whose last message a History remembers while no publish
// uses them; a channel forgotten costs its next publish one more round trip.
const maxChanStates = 10_000

// maxAttempts bounds the tries of one publish that finds its stream gone. Attempts that other
// nodes' publishes beat to the channel's next offset are bounded by the publish's deadline
// instead: a node that lost the race re-reads the channel's last event before it tries again,
// while the winners try at once, so on a channel that several nodes publish to back to back
// one node can lose many times in a row (64 in 0.7 s in one CI run) and still win well within
// the deadline.
const maxAttempts = 64

// chanState is what a History knows of one channel's last message.
type chanState struct {
	known bool   // seq and pos are the channel's last message, as far as this node knows
	conn  uint64 // the broker's reconnections when known was set (a restarted server may lose streams)
	seq   uint64 // its stream sequence (0: the channel has none)
	pos   herald.Position
}

// NewHistory returns the History beside b, on b's connection and prefix.
func NewHistory(b *Broker) (*History, error) {
	js, err := jetstream.New(b.nc, jetstream.WithDefaultTimeout(b.cfg.Timeout))
	if err != nil {
		return nil, fmt.Errorf("nats history: %w", err)
	}
	h := &History{b: b, js: js, streams: map[streamKey]jetstream.Stream{}, creating: map[streamKey]*creation{}}
	h.chans.Max = maxChanStates
	return h, nil
}

// Publish implements herald.History. With the bus down it fails at once, having given no
// offset.
func (h *History) Publish(ctx context.Context, rule herald.HistoryRule, msg herald.BusMessage) (herald.Position, error) {
	const what = "nats history publish"
	if err := broker.CheckRule(rule); err != nil {
		return herald.Position{}, err
	}
	if h.b.closed.Load() || !h.b.nc.IsConnected() {
		h.b.count.PublishErrors.Add(1)
		return herald.Position{}, broker.Unavailable(what, nil)
	}
	ctx, cancel := h.deadline(ctx)
	defer cancel()
	k := broker.Key{App: msg.App, Channel: msg.Channel}
	cs, unlock := h.chans.Lock(k)
	defer unlock()
	pos, sealed, err := h.store(ctx, rule, msg, cs)
	if r := (*repeat)(nil); errors.As(err, &r) {
		return h.again(ctx, rule, msg, r.seq)
	}
	if err != nil {
		h.b.count.PublishErrors.Add(1)
		return herald.Position{}, fmt.Errorf("%s: %w", what, err)
	}
	// Holding cs.mu: this node's publishes leave in offset order.
	if sealed != nil { // the very bytes kept: their position is sealed in them
		if h.b.closed.Load() || !h.b.nc.IsConnected() {
			h.b.count.PublishErrors.Add(1)
			return pos, broker.Unavailable("nats publish", nil)
		}
		return pos, h.b.publish(broker.Subject(h.b.cfg.Prefix, msg.App, msg.Channel), sealed)
	}
	msg.Epoch, msg.Offset = pos.Epoch, pos.Offset
	return pos, h.b.Publish(ctx, msg)
}

// again answers the publish of msg, whose idempotency key the stream holds as its message
// seq: the position of that message, which it publishes again in case the publish that stored
// it did not (the node stopped between the two; receivers drop an offset they have). When
// the message is gone (aged out) or cannot be read now, the position is not known: the zero
// Position, and still no error, for the event was kept.
func (h *History) again(ctx context.Context, rule herald.HistoryRule, msg herald.BusMessage, seq uint64) (herald.Position, error) {
	s, err := h.stream(ctx, streamKey{app: msg.App, rule: rule}, false)
	if err != nil || s == nil {
		return herald.Position{}, nil
	}
	m, err := s.GetMsg(ctx, seq)
	if err != nil {
		return herald.Position{}, nil
	}
	pos, err := positionOf(m.Header)
	if err != nil {
		return herald.Position{}, nil
	}
	if h.b.auth != nil { // the very bytes kept: their position is sealed in them
		_ = h.b.publish(broker.Subject(h.b.cfg.Prefix, msg.App, msg.Channel), m.Data)
		return pos, nil
	}
	msg.Epoch, msg.Offset, msg.Payload = pos.Epoch, pos.Offset, m.Data
	_ = h.b.Publish(ctx, msg)
	return pos, nil
}

// store keeps msg's payload as the channel's next event and returns its position. With a
// cluster secret it keeps msg sealed, its position in it, and returns those bytes to publish
// as they are. The caller holds cs.mu.
func (h *History) store(ctx context.Context, rule herald.HistoryRule, msg herald.BusMessage, cs *chanState) (herald.Position, []byte, error) {
	sk := streamKey{app: msg.App, rule: rule}
	subject := h.subject(sk, msg.Channel)
	var last error // why the previous attempt failed
	waited := 0    // the pauses for publishes in flight
	beaten := 0    // the attempts other nodes' publishes beat
	var beatenBy error
	outrun := func() bool { return beaten > 0 && ctx.Err() != nil } // beaten until the deadline
	busy := func() error {
		return herald.Errorf(herald.CodeBusy, "channel %q: %d attempts beaten by other nodes' publishes until the deadline (last: %v)", msg.Channel, beaten, beatenBy)
	}
	for attempt := 1; ; {
		if attempt > maxAttempts {
			return herald.Position{}, nil, fmt.Errorf("channel %q: %d attempts found its history stream gone: %w", msg.Channel, maxAttempts, unavailable(last))
		}
		if outrun() {
			return herald.Position{}, nil, busy()
		}
		s, err := h.stream(ctx, sk, true)
		if err != nil {
			return herald.Position{}, nil, err
		}
		if conn := h.b.count.Reconnects.Load(); !cs.known || cs.conn != conn {
			cs.conn = conn
			if cs.seq, cs.pos, err = lastOf(ctx, s, subject); err != nil {
				if missing(err) {
					h.forget(sk, s)
					last = err
					attempt++
					continue
				}
				if outrun() {
					return herald.Position{}, nil, busy()
				}
				return herald.Position{}, nil, unavailable(err)
			}
			if cs.seq == 0 {
				cs.pos = herald.Position{Epoch: broker.NewEpoch()}
			}
			cs.known = true
		}
		next := herald.Position{Epoch: cs.pos.Epoch, Offset: cs.pos.Offset + 1}
		m := &nats.Msg{Subject: subject, Data: msg.Payload, Header: nats.Header{}}
		var sealed []byte
		if a := h.b.auth; a != nil {
			msg.Epoch, msg.Offset = next.Epoch, next.Offset
			sealed = a.Seal(make([]byte, 0, broker.SealedSize(msg)), msg)
			m.Data = sealed
		}
		m.Header.Set(epochHeader, next.Epoch)
		m.Header.Set(offsetHeader, strconv.FormatUint(next.Offset, 10))
		m.Header.Set(atHeader, strconv.FormatInt(time.Now().UnixMilli(), 10))
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(cs.seq, 10))
		keyed := h.keyed(msg)
		switch {
		case keyed:
			m.Header.Set(jetstream.MsgIDHeader, keyID(msg.Channel, msg.Key))
		case h.replicas() > 1:
			m.Header.Set(jetstream.MsgIDHeader, offsetID(msg.Channel, next.Offset))
		}
		ack, err := h.js.PublishMsg(ctx, m, jetstream.WithRetryAttempts(0))
		if err == nil && ack.Duplicate && keyed { // stored before, by this publish's first attempt or another's
			cs.known = false
			return herald.Position{}, nil, &repeat{seq: ack.Sequence}
		}
		if err == nil && ack.Duplicate { // the offset was stored by another publish first
			cs.known, last = false, fmt.Errorf("offset %d stored by another publish", next.Offset)
			if err := pause(ctx, waited); err != nil {
				return herald.Position{}, nil, herald.Errorf(herald.CodeBusy, "channel %q: beaten by other nodes' publishes until the deadline (last: %v)", msg.Channel, last)
			}
			waited++
			continue
		}
		if err == nil {
			cs.seq, cs.pos = ack.Sequence, next
			return next, sealed, nil
		}
		last = err
		if inFlight(err) { // what this node knows may still be right: try it again shortly
			if err := pause(ctx, waited); err != nil {
				if notReady(last) {
					return herald.Position{}, nil, unavailable(last)
				}
				return herald.Position{}, nil, herald.Errorf(herald.CodeBusy, "channel %q: other nodes' publishes in flight until the deadline (last: %v)", msg.Channel, last)
			}
			waited++
			continue
		}
		cs.known = false
		switch {
		case wrongLast(err):
			beaten, beatenBy = beaten+1, err
		case outrun():
			return herald.Position{}, nil, busy()
		case missing(err):
			attempt++
			h.forget(sk, s)
		case errors.Is(err, nats.ErrMaxPayload):
			return herald.Position{}, nil, fmt.Errorf("%w: %w", herald.Errorf(herald.CodeTooLarge, "message too large for the history stream"), err)
		default:
			return herald.Position{}, nil, unavailable(err)
		}
	}
}

// offsetID is the message ID (Nats-Msg-Id) of a channel's event at offset in a replicated
// stream: JetStream stores one message of an ID within the stream's duplicate window, and
// acknowledges another as a duplicate. It has no epoch: the first publishes of a channel
// from several nodes at once each make an epoch, and must be told apart by offset alone.
func offsetID(channel string, offset uint64) string {
	return broker.Token(channel) + " " + strconv.FormatUint(offset, 10)
}

// keyID is the message ID of a channel's event with an idempotency key: the stream keeps one
// within its duplicate window, the key window (Publish).
func keyID(channel, key string) string { return "k " + broker.Token(channel) + " " + key }

// keyed reports whether msg is stored with its idempotency key as its message ID, so that
// the stream keeps it once: when it has one, unless its stream is replicated on a nats-server
// before 2.11. Those check a publish's expected last sequence against what they have stored
// only, and an event needs its position as its ID (offsetID) so that two nodes' publishes at
// one moment are not both stored with one offset; its key is then checked by the publishing
// node only (cluster.Replicated), not across nodes.
func (h *History) keyed(msg herald.BusMessage) bool {
	return msg.Key != "" && (h.replicas() == 1 || h.b.serverAtLeast(2, 11))
}

// repeat is store's answer for an event whose idempotency key the stream has stored before,
// as its message seq.
type repeat struct{ seq uint64 }

func (r *repeat) Error() string { return fmt.Sprintf("stored before as message %d", r.seq) }

// lastOf returns the stream sequence and position of subject's last message in s, or 0 and
// the zero position when it has none.
func lastOf(ctx context.Context, s jetstream.Stream, subject string) (uint64, herald.Position, error) {
	m, err := retry(ctx, func(ctx context.Context) (*jetstream.RawStreamMsg, error) {
		return s.GetLastMsgForSubject(ctx, subject)
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, herald.Position{}, nil
	}
	if err != nil {
		return 0, herald.Position{}, err
	}
	p, err := positionOf(m.Header)
	if err != nil {
		return 0, herald.Position{}, fmt.Errorf("message %d of %s: %w", m.Sequence, subject, err)
	}
	return m.Sequence, p, nil
}

// positionOf reads a stored event's position from its headers.
func positionOf(hdr nats.Header) (herald.Position, error) {
	o, err := strconv.ParseUint(hdr.Get(offsetHeader), 10, 64)
	e := hdr.Get(epochHeader)
	if err != nil || o == 0 || e == "" || len(e) > broker.MaxEpochBytes {
		return herald.Position{}, herald.Errorf(herald.CodeInternal, "no position in its headers: not an event herald stored")
	}
	return herald.Position{Epoch: e, Offset: o}, nil
}

// wrongLast reports whether err is JetStream's refusal of a publish whose expected last
// sequence of its subject is not the last one.
func wrongLast(err error) bool {
	var e *jetstream.APIError
	return errors.As(err, &e) && e.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// inFlight reports whether err is JetStream's refusal of a publish to a replicated stream
// while another publish of its subject with an expected last sequence is being stored
// (nats-server 2.11 and later), or before a new stream leader has applied what it was given
// (2.11): the expectation is checked once that is done, so the publish is made again a
// moment later, as it is.
func inFlight(err error) bool {
	var e *jetstream.APIError
	return errors.As(err, &e) && (e.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant || e.ErrorCode == errIDInFlight) ||
		notReady(err)
}

// notReady reports whether err is nats-server 2.11's refusal of a publish with an expected
// last sequence of its subject by a stream leader that has not yet applied the messages it
// was given (after an election).
func notReady(err error) bool {
	var e *jetstream.APIError
	return errors.As(err, &e) && e.ErrorCode == errNotReady
}

// nats-server's refusals of a publish to a replicated stream while another is in flight,
// from 2.11 on (besides jetstream.JSErrCodeStreamWrongLastSequenceConstant).
const (
	errIDInFlight jetstream.ErrorCode = 10158 // its message ID (offsetID) is another's, still being stored
	errNotReady   jetstream.ErrorCode = 10163 // see notReady
)

// pause waits before publish n+1 of a channel that JetStream refused while another was in
// flight: a random time up to 1 ms, doubled each time up to 32 ms (publishes of several
// nodes so take turns at random instead of in lockstep). It fails when ctx ends first.
func pause(ctx context.Context, n int) error {
	t := time.NewTimer(time.Duration(rand.Int64N(int64(time.Millisecond << min(n, 5)))))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// missing reports whether err says that the stream is gone: nobody answers for its subjects.
func missing(err error) bool {
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrStreamNotFound)
}

// unavailable wraps a failure to reach JetStream or to be served by it in CodeUnavailable;
// herald's own errors pass as they are.
func unavailable(err error) error {
	var e *herald.Error
	if errors.As(err, &e) {
		return err
	}
	return fmt.Errorf("%w: %w", herald.Errorf(herald.CodeUnavailable, "cluster bus unavailable"), err)
}

// deadline returns ctx bounded by the broker's Timeout when it has no deadline.
func (h *History) deadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, h.b.cfg.Timeout)
}

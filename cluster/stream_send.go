package cluster

import (
	"context"
	"time"

	"github.com/herald-rt/herald"
)

// sendBus is what the sender uses of the bus.
type sendBus interface {
	Connected() bool
	Publish(ctx context.Context, msg herald.BusMessage) error
	Flush(ctx context.Context) error
}

// sender publishes this node's share (localShare) and its requests to the others (requests),
// from the stream's goroutine: each batch ends with this node's record.
type sender struct {
	epoch     uint64
	seq       uint64 // of the last batch
	heartbeat time.Duration
	release   string
	behind    func() bool
	// legacy: write batches as v0.1.0 did (no node record, no features), for tests.
	legacy bool
	bus    sendBus
	req    *requests
	local  *localShare
}

// maxStateBatch bounds one batch's payload.
const maxStateBatch = 64 << 10

// send publishes what is due: a snapshot when asked for, else the dirty records; an empty
// batch when beat and nothing else went out.
func (s *sender) send(ctx context.Context, beat bool) {
	if !s.bus.Connected() {
		return // a snapshot follows the bus's return (watchBus)
	}
	var flags byte
	if s.req.syncAll.Swap(false) {
		flags |= flagSyncAll
	}
	if s.req.wantCache.Swap(false) {
		flags |= flagWantCache
	}
	var asks []string
	s.req.askOne.Range(func(k, _ any) bool {
		asks = append(asks, k.(string))
		s.req.askOne.Delete(k)
		return true
	})
	var recs []stateRecord
	snap := s.req.snapshot.Swap(false)
	if snap {
		d := s.local.takeDirty() // the snapshot has everything they say
		recs = s.local.snapshotRecords(d)
	} else {
		recs = s.local.dirtyRecords()
	}
	announce := s.req.announce.Swap(false)
	if len(recs) == 0 && flags == 0 && len(asks) == 0 && !snap && !beat && !announce {
		return
	}
	ok := s.publish(ctx, flags, snap, recs)
	for _, target := range asks {
		ok = ok && s.publishHeader(ctx, stateHeader{flags: flagSyncOne, target: target})
	}
	s.req.cacheFor.Range(func(k, _ any) bool {
		s.req.cacheFor.Delete(k)
		if recs := s.local.cacheRecords(k.(string)); ok && len(recs) > 0 {
			ok = s.publish(ctx, 0, false, recs)
		}
		return true
	})
	if !ok {
		s.req.snapshot.Store(true) // records were lost: the next batch is a snapshot
	}
}

// publish sends recs as one batch or more; a snapshot is marked by its first and last batch.
func (s *sender) publish(ctx context.Context, flags byte, snap bool, recs []stateRecord) bool {
	first := true
	for {
		var body []byte
		n := 0
		for n < len(recs) && len(body) < maxStateBatch {
			body = appendStateRecord(body, recs[n])
			n++
		}
		recs = recs[n:]
		h := stateHeader{flags: flags}
		if snap && first {
			h.flags |= flagSnapStart
		}
		if snap && len(recs) == 0 {
			h.flags |= flagSnapEnd
		}
		if !s.publishBatch(ctx, h, body) {
			return false
		}
		first, flags = false, 0
		if len(recs) == 0 {
			return true
		}
	}
}

func (s *sender) publishHeader(ctx context.Context, h stateHeader) bool {
	return s.publishBatch(ctx, h, nil)
}

func (s *sender) publishBatch(ctx context.Context, h stateHeader, body []byte) bool {
	s.seq++
	h.epoch, h.seq = s.epoch, s.seq
	payload := append(appendStateHeader(nil, h), body...)
	if !s.legacy {
		payload = appendNodeRecord(payload, s.nodeRecord())
	}
	// Bounded: a bus queue full of events must not hold the heartbeat back for long.
	ctx, cancel := context.WithTimeout(ctx, s.heartbeat)
	defer cancel()
	return s.bus.Publish(ctx, herald.BusMessage{Kind: herald.BusState, Channel: stateKey, Payload: payload}) == nil
}

// bye tells the others this node leaves, so they drop its share at once.
func (s *sender) bye() {
	if !s.bus.Connected() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s.send(ctx, false) // the last leaves of the drain
	if s.publishHeader(ctx, stateHeader{flags: flagBye}) {
		_ = s.bus.Flush(ctx)
	}
}

// announced is what this node announces it reads.
func (s *sender) announced() Feature {
	if s.legacy {
		return 0
	}
	return featuresRead
}

// nodeRecord is the record that ends each of this node's batches.
func (s *sender) nodeRecord() nodeRecord {
	return nodeRecord{version: stateVersion, features: s.announced(), release: s.release, behind: s.behind()}
}

package cluster

import (
	"encoding/binary"
	"errors"
)

// A BusState message is one batch of a node's state stream: a header, then records. Records
// carry absolute values (a channel's subscription count on the sending node, whether a user
// is a member there), so a batch can be applied twice and a snapshot is just every record.
//
//	header:  epoch uvarint, seq uvarint, flags byte, [target string when flagSyncOne]
//	record:  recSubs   app, channel, subs<<1 | fired uvarint
//	         recMember app, channel, user, present | fired<<1 byte, info (when present)
//	         recCache  app, channel, target, age uvarint (ms), frame
//
// Strings are a uvarint length and the bytes.

const (
	flagSnapStart byte = 1 << iota // the first batch of a snapshot: the sender's share starts empty
	flagSnapEnd                    // the last batch of a snapshot
	flagSyncAll                    // every node: send your snapshot
	flagSyncOne                    // the node named by target: send your snapshot
	flagBye                        // the sender leaves the cluster: drop its share now
	flagWantCache                  // every node: send me (the sender) your cache channels' events
)

const (
	recSubs byte = iota + 1
	recMember
	recCache // for the node whose epoch is target only: a cache channel's last event
)

type stateHeader struct {
	epoch, seq uint64
	flags      byte
	target     string
}

type stateRecord struct {
	op           byte
	app, channel string
	subs         int
	user         string
	present      bool
	info         []byte // recMember: the member's info; recCache: the frame
	fired        bool   // recSubs, recMember: the sender reported the change's activity
	target       string // recCache
	age          int64  // recCache, ms
}

var errStateMalformed = errors.New("cluster: malformed state message")

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendStateHeader(b []byte, h stateHeader) []byte {
	b = binary.AppendUvarint(b, h.epoch)
	b = binary.AppendUvarint(b, h.seq)
	b = append(b, h.flags)
	if h.flags&flagSyncOne != 0 {
		b = appendString(b, h.target)
	}
	return b
}

func appendStateRecord(b []byte, r stateRecord) []byte {
	b = append(b, r.op)
	b = appendString(b, r.app)
	b = appendString(b, r.channel)
	switch r.op {
	case recSubs:
		b = binary.AppendUvarint(b, uint64(r.subs)<<1|uint64(bit(r.fired)))
	case recMember:
		b = appendString(b, r.user)
		b = append(b, bit(r.present)|bit(r.fired)<<1)
		if r.present {
			b = appendString(b, string(r.info))
		}
	case recCache:
		b = appendString(b, r.target)
		b = binary.AppendUvarint(b, uint64(r.age))
		b = appendString(b, string(r.info))
	}
	return b
}

// stateReader decodes a batch.
type stateReader struct {
	b   []byte
	err error
}

func (r *stateReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errStateMalformed
		r.b = nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *stateReader) byte() byte {
	if len(r.b) == 0 {
		r.err = errStateMalformed
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *stateReader) string() string {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.err = errStateMalformed
		r.b = nil
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *stateReader) header() stateHeader {
	h := stateHeader{epoch: r.uvarint(), seq: r.uvarint(), flags: r.byte()}
	if h.flags&flagSyncOne != 0 {
		h.target = r.string()
	}
	return h
}

// next decodes the next record; ok is false at the end or on an error (see r.err).
func (r *stateReader) next() (rec stateRecord, ok bool) {
	if r.err != nil || len(r.b) == 0 {
		return rec, false
	}
	rec.op = r.byte()
	rec.app = r.string()
	rec.channel = r.string()
	switch rec.op {
	case recSubs:
		v := r.uvarint()
		rec.subs, rec.fired = int(v>>1), v&1 != 0
	case recMember:
		rec.user = r.string()
		f := r.byte()
		rec.fired = f&2 != 0
		if rec.present = f&1 != 0; rec.present {
			rec.info = []byte(r.string())
		}
	case recCache:
		rec.target = r.string()
		rec.age = int64(r.uvarint())
		rec.info = []byte(r.string())
	default:
		r.err = errStateMalformed
	}
	return rec, r.err == nil
}

func bit(b bool) byte {
	if b {
		return 1
	}
	return 0
}

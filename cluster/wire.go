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
//
// Version 2 of the stream (this release; the previous one, v0.1.0, wrote version 1 and has no
// version field) adds extension records, every op from recNode up:
//
//	op, app, channel (as the records above), body string
//
// A reader skips the extension records whose op it does not know, so a later release may add
// some that earlier ones can ignore; version 1 readers stop at the first one, after applying
// the records before it. Every batch of version 2 therefore ends with one: recNode, the
// sender's node record (nodeRecord: the stream version of the batch, the wire features the
// sender reads, its release), which is how the others learn its version and features and
// version 1 readers lose nothing. A batch without one is version 1. A batch whose node record
// says a version this node does not know is refused whole (receiver.receive): a later release
// sends one only once every live node announces that it reads it (docs/cluster.md).

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
	recNode  // version 2: the sender's node record, the last record of each of its batches
)

// stateVersion is the version of the state stream this node writes and the highest it reads.
const stateVersion = 2

// nodeRecord is the body of a recNode record: uvarint version, uvarint features, release
// string, then (from this release on; absent: 0) a byte whose bit 0 says the sender is behind
// (pressure.go); a later version may append fields, which this one does not read.
type nodeRecord struct {
	version  int
	features Feature
	release  string
	behind   bool
}

func appendNodeRecord(b []byte, n nodeRecord) []byte {
	var body []byte
	body = binary.AppendUvarint(body, uint64(n.version))
	body = binary.AppendUvarint(body, uint64(n.features))
	body = appendString(body, n.release)
	body = append(body, bit(n.behind))
	b = append(b, recNode)
	b = appendString(b, "")
	b = appendString(b, "")
	return appendString(b, string(body))
}

// maxRelease bounds the release string kept of a peer.
const maxRelease = 64

func decodeNodeRecord(body []byte) (nodeRecord, error) {
	r := stateReader{b: body}
	n := nodeRecord{version: int(min(r.uvarint(), 1<<20)), features: Feature(r.uvarint())}
	n.release = r.string()
	if len(n.release) > maxRelease {
		n.release = n.release[:maxRelease]
	}
	if r.err == nil && len(r.b) > 0 {
		n.behind = r.byte()&1 != 0
	}
	return n, r.err
}

// batchNode finds the node record of a batch whose header r has read, without decoding the
// other records: found is false for a batch of version 1 (no node record).
func batchNode(r stateReader) (n nodeRecord, found bool, err error) {
	for r.err == nil && len(r.b) > 0 {
		op := r.byte()
		r.skipString() // app
		r.skipString() // channel
		switch {
		case op == recSubs:
			r.uvarint()
		case op == recMember:
			r.skipString()
			if r.byte()&1 != 0 {
				r.skipString()
			}
		case op == recCache:
			r.skipString()
			r.uvarint()
			r.skipString()
		case op == recNode:
			body := r.bytes()
			if r.err == nil {
				n, err = decodeNodeRecord(body)
				return n, true, err
			}
		case op > recNode:
			r.skipString()
		default:
			r.err = errStateMalformed
		}
	}
	return n, false, r.err
}

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

// bytes reads a string's bytes without copying them.
func (r *stateReader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.err = errStateMalformed
		r.b = nil
		return nil
	}
	b := r.b[:n]
	r.b = r.b[n:]
	return b
}

func (r *stateReader) skipString() { r.bytes() }

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
		if rec.op < recNode {
			r.err = errStateMalformed
			break
		}
		rec.info = r.bytes() // an extension record (recNode, or one of a later release): its body
	}
	return rec, r.err == nil
}

func bit(b bool) byte {
	if b {
		return 1
	}
	return 0
}

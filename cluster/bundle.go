package cluster

import (
	"encoding/binary"
	"sync/atomic"
)

// A bundle (herald.BusBundle) is several consecutive events of one channel, published in one
// call (a REST batch, a Kafka batch), sent as one bus message instead of one each: fewer messages for
// the bus to route and the nodes to read and unseal. Its payload is each event in publish
// order:
//
//	origin uvarint (Unix ns, 0: none), excluded socket string, frame string
//
// Only channels without history are bundled (a history channel's events keep one message
// and one position each) and not cache channels (each is a BusCache to every node), and
// only while every live node announces FeatureBundles: a node of v0.1.0 would drop them
// (it ignores kinds it does not know). Sealing (broker.Auth) covers a bundle as any message.
// A node sends bundles in publishBundle (replicated_publish.go) and reads them in
// receiveBundle (replicated_receive.go).

// maxBundle bounds a bundle's payload: a larger batch goes as several.
const maxBundle = 64 << 10

// bundleStats counts the bundles sent and received (ClusterStats).
type bundleStats struct {
	sent, events, received, bad atomic.Uint64
}

// appendBundled appends one event to a bundle's payload.
func appendBundled(b []byte, exclude string, origin int64, frame []byte) []byte {
	b = binary.AppendUvarint(b, uint64(max(origin, 0)))
	b = appendString(b, exclude)
	b = binary.AppendUvarint(b, uint64(len(frame)))
	return append(b, frame...)
}

// eachBundled calls f with each event of a bundle's payload, in order, after checking that
// the whole payload decodes (nothing is delivered of one that does not): false when not.
// frame aliases payload.
func eachBundled(payload []byte, f func(exclude []byte, origin int64, frame []byte)) bool {
	for pass := 0; pass < 2; pass++ {
		r := stateReader{b: payload}
		n := 0
		for r.err == nil && len(r.b) > 0 {
			origin := r.uvarint()
			exclude := r.bytes()
			frame := r.bytes()
			if r.err == nil && origin <= 1<<63-1 && pass == 1 {
				f(exclude, int64(origin), frame)
			}
			if origin > 1<<63-1 {
				r.err = errStateMalformed
			}
			n++
		}
		if r.err != nil || n == 0 {
			return false
		}
	}
	return true
}

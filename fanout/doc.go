// Package fanout is herald's fan-out engine: it owns the connections' outbound side and
// delivers frames to the subscribers of channels. It knows nothing of the Pusher protocol
// (the frames it writes of its own accord, a ping and two closes, are given to it already
// encoded) nor of the cluster: the layers above decide who subscribes to what, and hand it
// frames to queue.
//
// A fixed pool of workers (about one per core) owns the connections: each connection
// belongs to one worker, which alone queues frames for it and writes them, once per batch,
// with one writev. Every channel keeps, per worker, the list of that worker's subscribers,
// and only the worker reads or changes it, so a broadcast takes no lock, copies nothing and
// allocates nothing per recipient: the publisher hands one shared frame to each worker that
// has subscribers (Dispatch). Commands to a worker are processed in order, which keeps
// per-channel publish order for every subscriber. A connection whose queue passes its byte
// bound is a slow consumer and is closed, so no publisher ever waits for one.
//
// Engine is safe for concurrent use; New starts its goroutines, Stop stops them. A Conn's
// read side (the layer above) and its worker share only atomics.
package fanout

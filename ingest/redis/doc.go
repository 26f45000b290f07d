// Package redis is the Redis ingest source, in one of two modes.
//
// Streams (at least once): the nodes read one stream in one consumer group (XREADGROUP);
// each batch of entries goes to an ingest.Pipeline in order and is acknowledged (XACK) only
// once the pipeline reports it done. A node that starts reads its own pending entries first;
// entries left pending by a consumer that died are claimed (XAUTOCLAIM) once idle for
// ClaimIdle. Order holds per consumer: with one node reading a stream, its entries reach the
// channels in stream order; with several, the group spreads entries over them, and a claimed
// entry comes after newer ones.
//
// Pub/sub (at most once): the node subscribes to patterns (PSUBSCRIBE); a message published
// while the node is disconnected, or dropped by Redis because the node fell behind (the
// client-output-buffer-limit for pub/sub), is lost. Every node that subscribes receives every
// message and publishes it to the whole cluster: give the source to one node only. The source
// is up once Redis confirms the subscription, and down from a lost connection until it has
// subscribed again.
//
// A Source's goroutine is started by Start and stopped by Close.
package redis

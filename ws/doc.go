// Package ws is herald's WebSocket connection layer: the only package that touches sockets
// after the HTTP upgrade.
//
// Connections are event-driven: an Engine runs a few pollers (epoll on Linux), each reading
// many sockets from one goroutine, so an idle connection costs a small struct and no
// goroutine or buffer of its own. Reads are parsed into messages and handed to a Handler on
// the poller goroutine. Writes are done by whoever owns the connection's outbound queue (the
// fan-out engine's workers) with one writev per batch; a socket whose kernel buffer is full
// asks the poller to report when it is writable again.
//
// Lifecycle: the poller reports a hang-up exactly once (Handler.OnHangup) and never touches
// the connection afterwards; the owner then calls Close, exactly once, when it has stopped
// writing. Shutdown may be called by the owner at any time before Close to end a connection;
// the hang-up follows. This split makes file descriptor reuse safe.
//
// TLS connections (NewTLSListener, TLSClient) are handed over after their upgrade like plain
// ones: on Linux the engine takes their descriptor too and drives crypto/tls without
// blocking, on pollers of their own (tls.go, tls_linux.go).
//
// The epoll engine is Linux's. Elsewhere (macOS, Windows), and on Linux with the build tag
// heraldportable, a portable engine with the same API and Handler contract runs instead: a
// reader and a writer goroutine per connection on net.Conn, writes queued in user space. It
// is the slower development path, not one to serve many connections with.
package ws

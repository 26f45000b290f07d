//go:build !linux || heraldportable

package ws

import "errors"

// writeNow is the epoll engine's: a handoffConn is never engaged on the portable engine,
// which uses the tls.Conn as a net.Conn.
func writeNow(int, []byte) (int, error) { return 0, errors.New("ws: no descriptor writes here") }

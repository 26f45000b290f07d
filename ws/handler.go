package ws

// Handler receives a connection's events. Every method is called on the poller goroutine
// that owns the connection, so calls for one connection never overlap; calls for different
// connections may run concurrently on different pollers.
type Handler interface {
	// OnMessage is called for each complete data message (text or binary, fragments joined)
	// and for each ping, pong and close frame. payload is only valid during the call.
	OnMessage(c *Conn, op Opcode, payload []byte)
	// OnProtocolError is called once when the peer breaks the WebSocket protocol (bad frame,
	// oversized message, invalid UTF-8) or takes longer than Config.FrameTimeout to send a
	// frame (ClosePolicy). The engine discards further input; the handler should send a close
	// frame with code and Shutdown the connection.
	OnProtocolError(c *Conn, code int, reason string)
	// OnWritable is called after a Writev that would have blocked, once the socket can take
	// more bytes.
	OnWritable(c *Conn)
	// OnHangup is called exactly once when the connection is gone (peer closed, reset, or
	// Shutdown). After it the engine never touches c; the handler must call c.Close once it
	// has stopped writing.
	OnHangup(c *Conn)
}

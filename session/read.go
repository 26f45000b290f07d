package session

import (
	"encoding/binary"
	"strings"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/ws"
)

// reader is the server as the WebSocket engine's handler: its methods run on the poller
// goroutine that reads the connection.
type reader struct{ s *Server }

var _ ws.Handler = reader{}

// OnMessage implements ws.Handler.
func (r reader) OnMessage(wc *ws.Conn, op ws.Opcode, payload []byte) {
	s, c := r.s, wc.Data.(*conn)
	c.Seen(s.now())
	m := c.Counters()
	m.Received.Add(1)
	m.ReceivedBytes.Add(int64(len(payload)))
	switch op {
	case ws.OpText:
		if c.CloseCode() != 0 {
			return // closing: what it sent after is not acted on (a subscribe would replay)
		}
		s.onText(c, payload)
	case ws.OpPing:
		s.eng.Send(&c.Conn, ws.AppendFrame(nil, ws.OpPong, payload))
	case ws.OpClose:
		code := ws.CloseNormal
		if len(payload) >= 2 {
			code = int(binary.BigEndian.Uint16(payload))
		}
		c.ClosedWith(code)
		s.eng.Close(&c.Conn, ws.CloseFrame(code, ""))
	case ws.OpBinary:
		s.sendError(c, herald.CodeInvalid, "binary frames are not supported")
	}
}

// OnProtocolError implements ws.Handler.
func (r reader) OnProtocolError(wc *ws.Conn, code int, reason string) {
	c := wc.Data.(*conn)
	c.ClosedWith(code)
	r.s.eng.Close(&c.Conn, ws.CloseFrame(code, reason))
}

// OnWritable implements ws.Handler.
func (r reader) OnWritable(wc *ws.Conn) { r.s.eng.Writable(&wc.Data.(*conn).Conn) }

// OnHangup implements ws.Handler: leave every channel the connection joined (and only
// those), forget its user, then let its worker release it.
func (r reader) OnHangup(wc *ws.Conn) {
	s, c := r.s, wc.Data.(*conn)
	for _, sb := range c.subs {
		s.leave(c, sb)
	}
	c.subs = nil
	if c.user() != "" {
		s.forgetUser(c)
	}
	if c.app.wants(herald.ConnectionClosed) {
		c.ClosedWith(ws.CloseAbnormal)
		c.app.emit(&herald.Activity{Kind: herald.ConnectionClosed, SocketID: c.ID(), Code: c.CloseCode()})
	}
	s.eng.Hangup(&c.Conn)
}

func (s *Server) onText(c *conn, payload []byte) {
	m, err := pusher.Decode(payload)
	if err != nil {
		s.sendError(c, herald.CodeInvalid, herald.MessageOf(err))
		return
	}
	switch m.Event {
	case "pusher:ping":
		s.eng.Send(&c.Conn, s.pongFrame)
	case "pusher:pong":
	case "pusher:subscribe":
		s.subscribe(c, m)
	case "pusher:unsubscribe":
		sm, err := pusher.DecodeSubscribe(m.Data)
		if err != nil {
			s.sendError(c, herald.CodeInvalid, herald.MessageOf(err))
			return
		}
		if i := c.subIndex(sm.Channel); i >= 0 {
			s.unsubscribe(c, i)
		}
	case "pusher:signin":
		s.signin(c, m)
	default:
		switch {
		case strings.HasPrefix(m.Event, "client-"):
			s.clientEvent(c, m)
		case strings.HasPrefix(m.Event, "pusher:"), strings.HasPrefix(m.Event, "pusher_internal:"):
			// Unknown protocol events are ignored, as Pusher does, so newer clients keep working.
		default:
			s.sendError(c, herald.CodeInvalid, "unknown event "+m.Event+": client events must start with client-")
		}
	}
}

// holder is what a connection's transport does to read a client no faster than its rates
// allow (*ws.Conn).
type holder interface{ Hold(d time.Duration) }

// slowDown stops reading c for wait, until its rate has a token again: a client that sends
// over its rate has its next messages wait in the kernel (and its writes block once the
// buffers are full) instead of each costing the node a refusal.
func (s *Server) slowDown(c *conn, wait time.Duration) {
	if h, ok := c.Transport().(holder); ok {
		h.Hold(wait)
	}
}

// sendError queues a pusher:error that does not close the connection.
func (s *Server) sendError(c *conn, code herald.Code, msg string) {
	s.eng.Send(&c.Conn, ws.TextFrame(pusher.AppendError(nil, code.PusherCode(), msg)))
}

// closeWith queues a pusher:error and a close frame with code, then ends the connection.
func (s *Server) closeWith(c *conn, code herald.Code, msg string) {
	c.ClosedWith(code.PusherCode())
	s.eng.Close(&c.Conn, closeFrames(code.PusherCode(), msg))
}

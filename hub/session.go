package hub

import (
	"encoding/binary"
	"strings"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/ws"
)

// The hub is the ws.Handler: these methods run on the connection's poller goroutine.
var _ ws.Handler = (*Hub)(nil)

// OnMessage implements ws.Handler.
func (h *Hub) OnMessage(wc *ws.Conn, op ws.Opcode, payload []byte) {
	c := wc.Data.(*Conn)
	c.lastSeen.Store(h.now())
	c.m.received.Add(1)
	c.m.receivedBytes.Add(int64(len(payload)))
	switch op {
	case ws.OpText:
		h.onText(c, payload)
	case ws.OpPing:
		c.w.inbox <- cmd{op: opSend, c: c, frame: ws.AppendFrame(nil, ws.OpPong, payload)}
	case ws.OpClose:
		code := ws.CloseNormal
		if len(payload) >= 2 {
			code = int(binary.BigEndian.Uint16(payload))
		}
		c.closedWith(code)
		c.w.inbox <- cmd{op: opClose, c: c, frame: ws.CloseFrame(code, "")}
	case ws.OpBinary:
		h.sendError(c, herald.CodeInvalid, "binary frames are not supported")
	}
}

// OnProtocolError implements ws.Handler.
func (h *Hub) OnProtocolError(wc *ws.Conn, code int, reason string) {
	c := wc.Data.(*Conn)
	c.closedWith(code)
	c.w.inbox <- cmd{op: opClose, c: c, frame: ws.CloseFrame(code, reason)}
}

// OnWritable implements ws.Handler.
func (h *Hub) OnWritable(wc *ws.Conn) {
	c := wc.Data.(*Conn)
	c.w.inbox <- cmd{op: opWritable, c: c}
}

// OnHangup implements ws.Handler: leave every channel the connection joined (and only
// those), forget its user, then let its worker release it.
func (h *Hub) OnHangup(wc *ws.Conn) {
	c := wc.Data.(*Conn)
	for _, s := range c.subs {
		h.leave(c, s)
	}
	if c.user != "" {
		h.forgetUser(c)
	}
	if c.app.wants(herald.ConnectionClosed) {
		c.closedWith(ws.CloseAbnormal)
		c.app.emit(&herald.Activity{Kind: herald.ConnectionClosed, SocketID: c.sid, Code: int(c.closeCode.Load())})
	}
	// c.subs now belongs to the worker, which drops c from those channels.
	c.w.inbox <- cmd{op: opHangup, c: c}
}

func (h *Hub) onText(c *Conn, payload []byte) {
	m, err := pusher.Decode(payload)
	if err != nil {
		h.sendError(c, herald.CodeInvalid, herald.MessageOf(err))
		return
	}
	switch m.Event {
	case "pusher:ping":
		c.w.inbox <- cmd{op: opSend, c: c, frame: h.pongFrame}
	case "pusher:pong":
	case "pusher:subscribe":
		h.subscribe(c, m)
	case "pusher:unsubscribe":
		s, err := pusher.DecodeSubscribe(m.Data)
		if err != nil {
			h.sendError(c, herald.CodeInvalid, herald.MessageOf(err))
			return
		}
		if i := c.subIndex(s.Channel); i >= 0 {
			h.unsubscribe(c, i)
		}
	case "pusher:signin":
		h.signin(c, m)
	default:
		switch {
		case strings.HasPrefix(m.Event, "client-"):
			h.clientEvent(c, m)
		case strings.HasPrefix(m.Event, "pusher:"), strings.HasPrefix(m.Event, "pusher_internal:"):
			// Unknown protocol events are ignored, as Pusher does, so newer clients keep working.
		default:
			h.sendError(c, herald.CodeInvalid, "unknown event "+m.Event+": client events must start with client-")
		}
	}
}

// sendError queues a pusher:error that does not close the connection.
func (h *Hub) sendError(c *Conn, code herald.Code, msg string) {
	c.w.inbox <- cmd{op: opSend, c: c, frame: ws.TextFrame(pusher.AppendError(nil, code.PusherCode(), msg))}
}

// closeWith queues a pusher:error and a close frame with code, then ends the connection.
func (h *Hub) closeWith(c *Conn, code herald.Code, msg string) {
	c.closedWith(code.PusherCode())
	c.w.inbox <- cmd{op: opClose, c: c, frame: closeFrames(code.PusherCode(), msg)}
}

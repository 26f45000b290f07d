package hub

import (
	"net/http"
	"strconv"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/ws"
)

// ServeWS upgrades a request for /app/{key} and hands the connection to a worker. Refusals
// (unknown key, node or app full, draining) complete the handshake and answer with the Pusher
// error and close code pusher-js acts on; they cost one write and never reach a worker.
func (h *Hub) ServeWS(w http.ResponseWriter, r *http.Request, key string) {
	accept, err := ws.CheckHandshake(r)
	if err != nil {
		http.Error(w, "expected a WebSocket handshake", http.StatusBadRequest)
		return
	}
	a := h.byKey[key]
	switch {
	case a == nil:
		h.refuse(w, accept, herald.CodeAppNotFound, "App key "+strconv.Quote(key)+" does not exist")
		return
	case h.draining.Load():
		h.refuse(w, accept, herald.CodeReconnect, "server shutting down, reconnect")
		return
	}
	if n := h.conns.Add(1); n > int64(h.cfg.MaxConnections) {
		h.conns.Add(-1)
		h.refuse(w, accept, herald.CodeOverCapacity, "node over capacity")
		return
	}
	if n := a.conns.Add(1); a.app.Limits.MaxConnections > 0 && n > int64(a.app.Limits.MaxConnections) {
		a.conns.Add(-1)
		h.conns.Add(-1)
		h.refuse(w, accept, herald.CodeAppOverQuota, "app over its connection quota")
		return
	}
	num := h.nextNum.Add(1)
	c := &Conn{app: a, num: num, sid: h.prefix + "." + strconv.FormatUint(num, 10)}
	c.w = h.workers[num%uint64(len(h.workers))]
	c.lastSeen.Store(h.now())
	hello := ws.TextFrame(pusher.AppendConnectionEstablished(nil, c.sid, int(h.cfg.ActivityTimeout.Seconds())))
	nc, pre, err := ws.Hijack(w, accept, hello, h.cfg.HandshakeTimeout)
	if err != nil {
		a.conns.Add(-1)
		h.conns.Add(-1)
		return
	}
	_, err = h.engine.Attach(nc, pre, func(wc *ws.Conn) {
		wc.Data = c
		c.t = wc
		c.w.inbox <- cmd{op: opAttach, c: c}
	})
	if err != nil && c.t == nil {
		// Never handed to a worker: uncount here.
		a.conns.Add(-1)
		h.conns.Add(-1)
		h.log.Warn("attach connection", "err", err)
	}
}

// refuse completes the handshake with a pusher:error and a close frame carrying code.
func (h *Hub) refuse(w http.ResponseWriter, accept string, code herald.Code, msg string) {
	h.refused.Add(1)
	nc, _, err := ws.Hijack(w, accept, closeFrames(code.PusherCode(), msg), h.cfg.HandshakeTimeout)
	if err == nil {
		nc.Close()
	}
}

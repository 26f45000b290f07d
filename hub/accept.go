package hub

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/ws"
)

// ServeWS upgrades a request for /app/{key} and hands the connection to a worker.
//
// Refusals (unknown key, disallowed origin, an address over its connection rate, the memory
// guard, node or app full, draining) complete the handshake and answer with the Pusher error
// and close code pusher-js acts on: 4001 and 4009 stop it retrying, 4100 makes it back off
// before reconnecting, 4004 stops it. A refusal costs one write, allocates no connection state
// and never reaches a worker, so a burst of refusals does not feed the churn that caused it.
func (h *Hub) ServeWS(w http.ResponseWriter, r *http.Request, key string) {
	accept, err := ws.CheckHandshake(r)
	if err != nil {
		http.Error(w, "expected a WebSocket handshake", http.StatusBadRequest)
		return
	}
	a := h.byKey[key]
	switch {
	case a == nil:
		h.refuse(w, accept, RefusedAppNotFound, herald.CodeAppNotFound, "App key "+strconv.Quote(key)+" does not exist")
		return
	case h.draining.Load():
		h.refuse(w, accept, RefusedDraining, herald.CodeReconnect, "server shutting down, reconnect")
		return
	case !a.origins.Allowed(r.Header.Get("Origin")):
		h.refuse(w, accept, RefusedOrigin, herald.CodeForbidden, "origin "+strconv.Quote(r.Header.Get("Origin"))+" is not allowed for this app")
		return
	case h.cfg.IPRate != nil && !h.cfg.IPRate.Allow(remoteIP(r), mono()):
		h.refuse(w, accept, RefusedIPRate, herald.CodeConnectionRate, "too many new connections from your address, back off")
		return
	case h.cfg.Memory.Refusing():
		h.refuse(w, accept, RefusedMemory, herald.CodeOverCapacity, "node over its memory limit")
		return
	}
	if n := h.conns.Add(1); n > int64(h.cfg.MaxConnections) {
		h.unclaim(nil)
		h.refuse(w, accept, RefusedNodeFull, herald.CodeOverCapacity, "node over capacity")
		return
	}
	if n := a.conns.Add(1); a.app.Limits.MaxConnections > 0 && n > int64(a.app.Limits.MaxConnections) {
		h.unclaim(a)
		h.refuse(w, accept, RefusedAppFull, herald.CodeAppOverQuota, "app over its connection quota")
		return
	}
	if h.draining.Load() {
		// Counted first, checked again: Shutdown sets draining before it reads the count, so
		// either it waits for this connection or this connection is refused here.
		h.unclaim(a)
		h.refuse(w, accept, RefusedDraining, herald.CodeReconnect, "server shutting down, reconnect")
		return
	}
	num := h.nextNum.Add(1)
	c := &Conn{app: a, num: num, sid: h.prefix + "." + strconv.FormatUint(num, 10)}
	widx := num % uint64(len(h.workers))
	c.w = h.workers[widx]
	c.m = &a.counters[widx]
	c.lastSeen.Store(h.now())
	hello := ws.TextFrame(pusher.AppendConnectionEstablished(nil, c.sid, int(h.cfg.ActivityTimeout.Seconds())))
	// Reported before the client has its socket id, so that whatever it does with it comes
	// after; a connection that never gets it is reported closed.
	opened := a.wants(herald.ConnectionOpened)
	if opened {
		a.emit(&herald.Activity{Kind: herald.ConnectionOpened, SocketID: c.sid, Origin: r.Header.Get("Origin")})
	}
	nc, pre, err := ws.Hijack(w, accept, hello, h.cfg.HandshakeTimeout)
	if err != nil {
		h.unclaim(a)
		h.neverAttached(a, c, opened)
		return
	}
	c.m.connects.Add(1)
	c.m.sent.Add(1) // connection_established
	c.m.sentBytes.Add(int64(len(hello)))
	_, err = h.engine.Attach(nc, pre, func(wc *ws.Conn) {
		wc.Data = c
		c.t = wc
		c.w.inbox <- cmd{op: opAttach, c: c}
		if h.draining.Load() {
			// The client already has connection_established, but Shutdown's close-all may
			// have passed this worker before the attach: close this one with 4200 too.
			c.closedWith(herald.CodeReconnect.PusherCode())
			c.w.inbox <- cmd{op: opClose, c: c, frame: h.closeShutdown}
		}
	})
	if err != nil && c.t == nil {
		// Never handed to a worker: uncount here.
		h.unclaim(a)
		c.m.disconnects.Add(1)
		h.log.Warn("attach connection", "err", err)
		h.neverAttached(a, c, opened)
	}
}

// neverAttached reports the close of a connection reported opened that no worker ever had
// (the handshake's write failed): 1006, as for a connection lost without a close frame.
func (h *Hub) neverAttached(a *appState, c *Conn, opened bool) {
	if opened && a.wants(herald.ConnectionClosed) {
		a.emit(&herald.Activity{Kind: herald.ConnectionClosed, SocketID: c.sid, Code: 1006})
	}
}

// unclaim undoes ServeWS's count of a connection that never reached a worker (and the count
// of app a, if not nil). Like uncount, it ends a shutdown's wait when the count reaches zero.
func (h *Hub) unclaim(a *appState) {
	if a != nil {
		a.conns.Add(-1)
	}
	if h.conns.Add(-1) == 0 && h.draining.Load() {
		h.drainOne.Do(func() { close(h.drained) })
	}
}

// refuse completes the handshake with a pusher:error and a close frame carrying code, counts
// the refusal and logs it at most once every 10 s per reason.
func (h *Hub) refuse(w http.ResponseWriter, accept string, why Refusal, code herald.Code, msg string) {
	n := h.refusals[why].Add(1)
	if h.refusalWarn[why].Due(h.now(), 10_000) {
		h.log.Warn("refusing connections", "reason", why.String(), "code", code.PusherCode(), "refused_total", n)
	}
	nc, _, err := ws.Hijack(w, accept, closeFrames(code.PusherCode(), msg), h.cfg.HandshakeTimeout)
	if err == nil {
		nc.Close()
	}
}

// remoteIP is the peer address of r; the limiter counts an unparsable one as the zero address.
func remoteIP(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, _ := netip.ParseAddr(host)
	return ip
}

package session

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/fanout"
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
func (s *Server) ServeWS(w http.ResponseWriter, r *http.Request, key string) {
	accept, err := ws.CheckHandshake(r)
	if err != nil {
		http.Error(w, "expected a WebSocket handshake", http.StatusBadRequest)
		return
	}
	app, found := s.store.AppByKey(key)
	switch {
	case !found && s.stale != nil && s.stale.Stale():
		// The store has lost its database: the key may be an app created meanwhile.
		s.refuse(w, accept, RefusedAppStoreDown, herald.CodeUnavailable, "app key "+strconv.Quote(key)+" is not known here and the app store is unreachable, retry later")
		return
	case !found:
		s.refuse(w, accept, RefusedAppNotFound, herald.CodeAppNotFound, "App key "+strconv.Quote(key)+" does not exist")
		return
	case app.Disabled:
		s.refuse(w, accept, RefusedAppDisabled, herald.CodeAppDisabled, "app is disabled")
		return
	}
	a := s.ensure(app)
	cfg := a.cur()
	switch {
	case s.eng.Draining():
		s.refuse(w, accept, RefusedDraining, herald.CodeReconnect, "server shutting down, reconnect")
		return
	case !cfg.origins.Allowed(r.Header.Get("Origin")):
		s.refuse(w, accept, RefusedOrigin, herald.CodeForbidden, "origin "+strconv.Quote(r.Header.Get("Origin"))+" is not allowed for this app")
		return
	case s.cfg.IPRate != nil && !s.cfg.IPRate.Allow(remoteIP(r), fanout.Mono()):
		s.refuse(w, accept, RefusedIPRate, herald.CodeConnectionRate, "too many new connections from your address, back off")
		return
	case s.cfg.Memory.Refusing():
		s.refuse(w, accept, RefusedMemory, herald.CodeOverCapacity, "node over its memory limit")
		return
	}
	if n := s.eng.Claim(); n > int64(s.cfg.MaxConnections) {
		s.eng.Unclaim(nil)
		s.refuse(w, accept, RefusedNodeFull, herald.CodeOverCapacity, "node over capacity")
		return
	}
	if n := a.g.Claim(); cfg.Limits.MaxConnections > 0 && n > int64(cfg.Limits.MaxConnections) {
		s.eng.Unclaim(a.g)
		s.refuse(w, accept, RefusedAppFull, herald.CodeAppOverQuota, "app over its connection quota")
		return
	}
	if s.eng.Draining() {
		// Counted first, checked again: the drain begins before it reads the count, so
		// either it waits for this connection or this connection is refused here.
		s.eng.Unclaim(a.g)
		s.refuse(w, accept, RefusedDraining, herald.CodeReconnect, "server shutting down, reconnect")
		return
	}
	c := &conn{app: a}
	s.eng.Init(&c.Conn, a.g)
	sid := c.ID()
	hello := ws.TextFrame(pusher.AppendConnectionEstablished(nil, sid, int(s.cfg.ActivityTimeout.Seconds())))
	// Reported before the client has its socket id, so that whatever it does with it comes
	// after; a connection that never gets it is reported closed.
	opened := a.wants(herald.ConnectionOpened)
	if opened {
		a.emit(&herald.Activity{Kind: herald.ConnectionOpened, SocketID: sid, Origin: r.Header.Get("Origin")})
	}
	nc, pre, err := ws.Hijack(w, accept, hello, s.cfg.HandshakeTimeout)
	if err != nil {
		s.eng.Unclaim(a.g)
		s.neverAttached(a, c, opened)
		return
	}
	m := c.Counters()
	m.Connects.Add(1)
	m.Sent.Add(1) // connection_established
	m.SentBytes.Add(int64(len(hello)))
	attached := false
	_, err = s.ws.Attach(nc, pre, func(wc *ws.Conn) {
		wc.Data = c
		attached = true
		s.eng.Attach(&c.Conn, wc)
	})
	if err != nil && !attached {
		// Never handed to a worker: uncount here.
		s.eng.Unclaim(a.g)
		m.Disconnects.Add(1)
		s.log.Warn("attach connection", "err", err)
		s.neverAttached(a, c, opened)
		return
	}
	// Checked again once attached: the app may have been disabled or deleted meanwhile, and
	// AppsChanged's close may have passed the connection's worker before the attach.
	if now, ok := s.store.AppByID(a.id); !ok || now.Disabled {
		code, msg := herald.CodeAppNotFound, "app deleted"
		if ok {
			code, msg = herald.CodeAppDisabled, "app disabled"
		}
		c.ClosedWith(code.PusherCode())
		s.eng.Close(&c.Conn, closeFrames(code.PusherCode(), msg))
	}
}

// neverAttached reports the close of a connection reported opened that no worker ever had
// (the handshake's write failed): 1006, as for a connection lost without a close frame.
func (s *Server) neverAttached(a *appState, c *conn, opened bool) {
	if opened && a.wants(herald.ConnectionClosed) {
		a.emit(&herald.Activity{Kind: herald.ConnectionClosed, SocketID: c.ID(), Code: 1006})
	}
}

// refuse completes the handshake with a pusher:error and a close frame carrying code, counts
// the refusal and logs it at most once every 10 s per reason.
func (s *Server) refuse(w http.ResponseWriter, accept string, why Refusal, code herald.Code, msg string) {
	n := s.refusals[why].Add(1)
	if s.refusalWarn[why].Due(s.now(), 10_000) {
		s.log.Warn("refusing connections", "reason", why.String(), "code", code.PusherCode(), "refused_total", n)
	}
	nc, _, err := ws.Hijack(w, accept, closeFrames(code.PusherCode(), msg), s.cfg.HandshakeTimeout)
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

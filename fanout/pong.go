package fanout

// missedPong handles c, whose ping went unanswered for the pong timeout, and reports whether
// it closed c with PongLost. It keeps c, and waits another pong timeout from now, when c has
// bytes in the kernel that its poller has not read yet: on a node starved of CPU a client's
// pong can wait there past the timeout, and closing such a client would drop a live
// connection. It keeps c so up to forgiveSilence in all: a connection whose bytes stay unread
// longer than that is closed all the same, so that a poller that no longer reads cannot keep
// connections forever. A connection it closes is logged, at most once a second, with what the
// kernel and the engine held for it, so that an operator can tell a silent client (nothing
// unread) from one this node did not read.
func (w *worker) missedPong(c *Conn, now int64) (closed bool) {
	unread, unsent := -1, -1
	if b, ok := c.t.(Backlogger); ok {
		if in, out, err := b.Backlog(); err == nil {
			unread, unsent = in, out
		}
	}
	silent := now - c.lastSeen.Load()
	if unread > 0 && silent < w.forgiveSilence() {
		w.e.pongUnread.Add(1)
		c.at = now
		return false
	}
	w.e.pongTimeouts.Add(1)
	if w.e.pongWarn.Due(now, 1000) {
		w.e.log.Warn("closing connection: ping not answered in time", "app_id", c.m.g.id, "socket_id", c.ID(),
			"pinged_ms_ago", now-c.at, "silent_ms", silent, "kernel_unread_bytes", unread,
			"kernel_unsent_bytes", unsent, "queued_bytes", c.outBytes, "blocked", c.blocked,
			"pong_timeouts_total", w.e.pongTimeouts.Load(), "pongs_unread_total", w.e.pongUnread.Load())
	}
	lost := w.e.cfg.PongLost
	c.ClosedWith(lost.Code)
	w.close(c, lost.Frame)
	return true
}

// forgiveSilence is how long (ms) a connection may stay unread before its pong timeout
// closes it whatever the kernel holds: the activity timeout and four pong timeouts.
func (w *worker) forgiveSilence() int64 {
	return w.e.cfg.ActivityTimeout.Milliseconds() + 4*w.e.cfg.PongTimeout.Milliseconds()
}

package ws

import "strconv"

// The frame parser both engines share: it turns the bytes read from one connection into
// messages for the Handler. A connection's calls never overlap (one poller, or one reader
// goroutine, owns its read state).

// track keeps c.since and p.timed up to date after a parse: c is busy while a frame or a
// fragmented message is incomplete; a new one (finished says one ended in this parse)
// restarts the clock.
func (p *poller) track(c *Conn, finished bool) {
	busy := !c.broken && (c.rbuf != nil || c.msgOp != 0)
	switch {
	case !busy || p.e.cfg.FrameTimeout < 0:
		if c.since != 0 {
			c.since = 0
			p.timed.Add(-1)
		}
	case c.since == 0:
		c.since = p.e.ms()
		p.timed.Add(1)
	case finished:
		c.since = p.e.ms()
	}
}

// feed parses data (appended to any partial frame c holds) and delivers what is complete.
func (p *poller) feed(c *Conn, data []byte) {
	if c.rbuf != nil {
		*c.rbuf = appendExact(*c.rbuf, data)
		data = *c.rbuf
	}
	used, pending, finished := p.parse(c, data)
	defer p.track(c, finished)
	rest := data[used:]
	if len(rest) == 0 || c.broken {
		c.rbuf = nil
		return
	}
	// Room for exactly the incomplete frame once its header is here, so the rest of it
	// arrives without the buffer doubling: a connection holds at most one frame's bytes here
	// plus what one read adds.
	size := max(len(rest), pending)
	if c.rbuf != nil && cap(*c.rbuf) >= size && cap(*c.rbuf) <= size+rbufSlack {
		// Reuse: rest may overlap *c.rbuf, which copy handles.
		b := *c.rbuf
		*c.rbuf = b[:copy(b[:len(rest)], rest)]
	} else {
		b := append(make([]byte, 0, size), rest...)
		if c.rbuf == nil {
			c.rbuf = new([]byte)
		}
		*c.rbuf = b
	}
}

// partial is the incomplete frame c holds (nil when none).
func (c *Conn) partial() []byte {
	if c.rbuf == nil {
		return nil
	}
	return *c.rbuf
}

// rbufSlack is how much larger than its incomplete frame a partial-frame buffer may stay
// before it is replaced by one of the right size.
const rbufSlack = 4096

// appendExact appends data to b, growing b to exactly the length needed when it is full.
func appendExact(b, data []byte) []byte {
	if need := len(b) + len(data); need > cap(b) {
		nb := make([]byte, len(b), need)
		copy(nb, b)
		b = nb
	}
	return append(b, data...)
}

// parse delivers every complete frame at the start of data and returns the bytes used and,
// when data ends inside a frame whose header is in, that frame's whole size (else 0).
// finished reports that a frame completed with no fragmented message left in progress.
func (p *poller) parse(c *Conn, data []byte) (used, pending int, finished bool) {
	limit := p.e.cfg.MaxMessageBytes
	for ; !c.broken; finished = finished || c.msgOp == 0 {
		if c.held() {
			return used, 0, finished // the rest waits for the hold's end
		}
		h, ok, bad := parseFrameHeader(data[used:], limit, !p.e.cfg.Client)
		if bad != nil {
			p.fail(c, bad.code, bad.reason)
			return len(data), 0, finished
		}
		if !ok {
			return used, 0, finished
		}
		if len(data)-used < h.size+h.length {
			return used, h.size + h.length, finished
		}
		payload := data[used+h.size : used+h.size+h.length]
		used += h.size + h.length
		if h.masked {
			unmask(payload, h.mask)
		}
		switch {
		case h.op == OpClose:
			if code, reason := checkClose(payload); code != 0 {
				p.fail(c, code, reason)
				return len(data), 0, finished
			}
			p.e.h.OnMessage(c, h.op, payload)
		case h.op > OpClose:
			p.e.h.OnMessage(c, h.op, payload)
		case h.op == OpContinuation:
			if c.msgOp == 0 {
				p.fail(c, CloseProtocolError, "continuation without a message")
				return len(data), 0, finished
			}
			m := c.msg // set while msgOp is
			if len(*m)+len(payload) > limit {
				p.fail(c, CloseTooBig, "message too big")
				return len(data), 0, finished
			}
			if need := len(*m) + len(payload); need > cap(*m) {
				// Grow by doubling, but never past the message limit.
				nb := make([]byte, len(*m), min(max(need, 2*cap(*m)), limit))
				copy(nb, *m)
				*m = nb
			}
			*m = append(*m, payload...)
			if h.fin {
				p.deliver(c, c.msgOp, *m)
				c.msg, c.msgOp = nil, 0
			}
		default:
			if c.msgOp != 0 {
				p.fail(c, CloseProtocolError, "new message inside a fragmented one")
				return len(data), 0, finished
			}
			if h.fin {
				p.deliver(c, h.op, payload)
			} else {
				m := append(make([]byte, 0, min(len(payload)*2, limit)), payload...)
				c.msgOp, c.msg = h.op, &m
			}
		}
	}
	return len(data), 0, finished
}

// checkClose validates a close frame's payload (RFC 6455 §5.5.1, §7.4): empty, or a status
// code an endpoint may send followed by a UTF-8 reason. It returns the close code to fail
// with, or 0.
func checkClose(payload []byte) (int, string) {
	if len(payload) == 0 {
		return 0, ""
	}
	if len(payload) == 1 {
		return CloseProtocolError, "close frame with a 1-byte payload"
	}
	code := int(payload[0])<<8 | int(payload[1])
	switch {
	case code >= 1000 && code <= 1003, code >= 1007 && code <= 1014, code >= 3000 && code <= 4999:
	default:
		return CloseProtocolError, "close code " + strconv.Itoa(code) + " may not be sent"
	}
	if !validUTF8(payload[2:]) {
		return CloseInvalidData, "close reason is not UTF-8"
	}
	return 0, ""
}

func (p *poller) deliver(c *Conn, op Opcode, payload []byte) {
	if op == OpText && !validUTF8(payload) {
		p.fail(c, CloseInvalidData, "invalid UTF-8")
		return
	}
	p.e.h.OnMessage(c, op, payload)
}

func (p *poller) fail(c *Conn, code int, reason string) {
	c.broken = true
	c.msg, c.msgOp = nil, 0
	p.e.h.OnProtocolError(c, code, reason)
}

package bench

// ServerInfo names the server a report was measured against.
type ServerInfo struct {
	WS    string `json:"ws"`
	REST  string `json:"rest,omitempty"`
	AppID string `json:"app_id"`
	PID   int    `json:"pid,omitempty"`
}

func (t Target) info(rest bool) ServerInfo {
	s := ServerInfo{WS: t.WS, AppID: t.AppID, PID: t.ServerPID}
	if rest {
		s.REST = t.REST
	}
	return s
}

// Lost counts connections that the server (or the network) ended before the generator closed
// them, with the first one's reason.
type Lost struct {
	Count      int    `json:"count"`
	FirstError string `json:"first_error,omitempty"`
}

func lostOf(p *pool) Lost {
	n, first := p.lost()
	l := Lost{Count: n}
	if first != nil {
		l.FirstError = first.Error()
	}
	return l
}

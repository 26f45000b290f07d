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

// timelinePoints stops tl, when set, and returns its points.
func timelinePoints(tl *Timeline) []Point {
	if tl == nil {
		return nil
	}
	tl.Stop()
	return tl.Points()
}

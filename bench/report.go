package bench

import (
	"fmt"
	"strconv"
	"strings"
)

// ServerInfo names the server a report was measured against.
type ServerInfo struct {
	WS string `json:"ws"` // as given: one URL, or the nodes' URLs comma-separated
	// Nodes are the nodes' WebSocket URLs, in the order connections were spread over them;
	// only when there are several.
	Nodes []string `json:"nodes,omitempty"`
	REST  string   `json:"rest,omitempty"` // where publishes went
	AppID string   `json:"app_id"`
	PID   int      `json:"pid,omitempty"`  // the server's process, when one was given
	PIDs  []int    `json:"pids,omitempty"` // one per node, when several were given
	Bus   []int    `json:"bus_pids,omitempty"`
}

func (t Target) info(rest bool) ServerInfo {
	s := ServerInfo{WS: t.WS, AppID: t.AppID, Bus: t.BusPIDs}
	if nodes, err := t.wsNodes(); err == nil && len(nodes) > 1 {
		s.Nodes = nodes
	}
	switch len(t.ServerPIDs) {
	case 0:
	case 1:
		s.PID = t.ServerPIDs[0]
	default:
		s.PIDs = t.ServerPIDs
	}
	if rest {
		s.REST = t.REST
	}
	return s
}

// on says, for the first line of a text report, what the run was against: "on <ws> and
// <rest>" for one node, as before clusters; the nodes and where publishes went for several;
// then the server's pids.
func (s ServerInfo) on() string {
	var b strings.Builder
	if len(s.Nodes) > 1 {
		fmt.Fprintf(&b, "on %d nodes %s", len(s.Nodes), strings.Join(s.Nodes, ", "))
		if s.REST != "" {
			fmt.Fprintf(&b, ", publishing to %s", s.REST)
		}
	} else {
		b.WriteString("on " + s.WS)
		if s.REST != "" {
			b.WriteString(" and " + s.REST)
		}
	}
	switch {
	case len(s.PIDs) > 0:
		pids := make([]string, len(s.PIDs))
		for i, p := range s.PIDs {
			pids[i] = strconv.Itoa(p)
		}
		fmt.Fprintf(&b, " (server pids %s)", strings.Join(pids, ", "))
	case s.PID != 0:
		fmt.Fprintf(&b, " (server pid %d)", s.PID)
	}
	if len(s.Bus) > 0 {
		pids := make([]string, len(s.Bus))
		for i, p := range s.Bus {
			pids[i] = strconv.Itoa(p)
		}
		fmt.Fprintf(&b, " (bus pids %s)", strings.Join(pids, ", "))
	}
	return b.String()
}

// timelinePoints stops tl, when set, and returns its points.
func timelinePoints(tl *Timeline) []Point {
	if tl == nil {
		return nil
	}
	tl.Stop()
	return tl.Points()
}

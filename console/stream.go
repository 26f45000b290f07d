package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// overview is what the page receives once an interval: every node's figures, this one's
// first, and the watched app's cluster-wide channels.
type overview struct {
	Node     string         `json:"node"`
	Apps     []string       `json:"apps"`
	Nodes    []nodeStats    `json:"nodes"`
	App      string         `json:"app,omitempty"`
	Channels int            `json:"channels"` // the app's occupied channels, cluster-wide
	Top      []ChannelCount `json:"top"`
	// Points are, by node, the points of the charts (see history.go) that this page has not
	// had yet: every one since the previous overview, oldest first.
	Points map[string][]point `json:"points"`
	// The debug log's losses: entries the rate sampled out since the app's log began, and
	// entries this page missed by falling behind the ring.
	Sampled uint64 `json:"sampled_out"`
	Lost    uint64 `json:"lost"`
}

const (
	topChannels = 10
	logTick     = 250 * time.Millisecond // how often a stream sends what the log gathered
	writeWait   = 10 * time.Second       // a page that reads nothing this long is cut off
)

// stream is the page's one connection (server-sent events): an "overview" event every
// interval and, for ?app=ID, "log" events with that app's debug log as it happens. It ends
// when the page goes, when a write stalls for writeWait, or at Close.
func (c *Console) stream(w http.ResponseWriter, r *http.Request) {
	if c.streams.Add(1) > maxStreams {
		c.streams.Add(-1)
		w.Header().Set("Retry-After", "5")
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": fmt.Sprintf("console: %d pages are open already", maxStreams), "code": http.StatusServiceUnavailable})
		return
	}
	defer c.streams.Add(-1)
	appID := r.URL.Query().Get("app")
	watch := c.watchOf(appID)
	if appID != "" && watch == nil {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": fmt.Sprintf("app %q does not exist", appID), "code": http.StatusNotFound})
		return
	}
	var next uint64
	if watch != nil {
		var changed bool
		next, changed = watch.attach()
		c.refresh(appID, changed)
		defer func() { c.refresh(appID, watch.detach()) }()
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	// The listener's request deadline would end the stream (net/http cancels a request
	// whose connection's read times out); a gone page shows as a failed write instead.
	_ = rc.SetReadDeadline(time.Time{})
	send := func(event string, v any) bool {
		b, err := json.Marshal(v)
		if err != nil {
			return false
		}
		_ = rc.SetWriteDeadline(time.Now().Add(writeWait))
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}

	var lost uint64
	var buf []entry
	sent := map[string]int64{} // by node, the newest point this page has
	sendOverview := func() bool {
		ov := overview{Node: c.cfg.Node, Apps: c.appIDs(), Nodes: c.allNodes(), App: appID, Lost: lost, Points: c.pointsAfter(sent)}
		if watch != nil {
			ov.Top, ov.Channels = c.cfg.Source.TopChannels(appID, topChannels)
			watch.mu.Lock()
			ov.Sampled = watch.sampled
			watch.mu.Unlock()
		}
		return send("overview", ov)
	}
	// The charts' last 15 minutes first, then each overview's points since.
	hist := c.history()
	for node, pts := range hist {
		if len(pts) > 0 {
			sent[node] = pts[len(pts)-1].TimeMS
		}
	}
	if !send("history", hist) || !sendOverview() {
		return
	}
	tick := time.NewTicker(logTick)
	defer tick.Stop()
	lastOverview := time.Now()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-c.ctx.Done():
			return
		case now := <-tick.C:
			if watch != nil {
				var l uint64
				buf, next, l, _ = watch.read(next, buf[:0])
				lost += l
				if len(buf) > 0 && !send("log", buf) {
					return
				}
			}
			if now.Sub(lastOverview) >= c.cfg.Interval {
				lastOverview = now
				if !sendOverview() {
					return
				}
			}
		}
	}
}

// refresh tells the server that the app's observer turned on or off.
func (c *Console) refresh(appID string, changed bool) {
	if changed && c.cfg.Refresh != nil {
		c.cfg.Refresh(appID)
	}
}

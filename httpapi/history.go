package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/ws"
)

// maxHistoryLimit bounds the events one history call returns.
const maxHistoryLimit = 1000

// historyEvent is one event of a history answer.
type historyEvent struct {
	Offset      uint64          `json:"offset"`
	Event       string          `json:"event"`
	Channel     string          `json:"channel"`
	Data        json.RawMessage `json:"data,omitempty"`
	PublishedAt int64           `json:"published_at"`
}

// history answers GET /apps/{id}/channels/{name}/history?since=&epoch=&limit=: the events the
// channel keeps after offset since (0: all), oldest first.
func (s *Server) history(w http.ResponseWriter, q *request) {
	name := q.r.PathValue("name")
	if err := pusher.ValidateChannelName(name, q.app.Limits.MaxChannelNameLength); err != nil {
		writeError(w, err)
		return
	}
	query := q.r.URL.Query()
	since, limit := uint64(0), 100
	if v := query.Get("since"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeError(w, herald.Errorf(herald.CodeInvalid, "since must be an offset: an integer from 0"))
			return
		}
		since = n
	}
	if v := query.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxHistoryLimit {
			writeError(w, herald.Errorf(herald.CodeInvalid, "limit must be an integer from 1 to %d", maxHistoryLimit))
			return
		}
		limit = n
	}
	page, err := s.hub.History(q.r.Context(), q.app.ID, name, since, limit)
	if err != nil {
		writeError(w, err)
		return
	}
	if epoch := query.Get("epoch"); epoch != "" && epoch != page.Latest.Epoch {
		writeJSON(w, http.StatusConflict, map[string]any{"error": "the channel's history has another epoch: its events since that position are lost",
			"code": http.StatusConflict, "epoch": page.Latest.Epoch, "latest": page.Latest.Offset})
		return
	}
	events := make([]historyEvent, 0, len(page.Entries))
	for _, e := range page.Entries {
		payload, ok := ws.TextPayload(e.Frame)
		if !ok {
			continue
		}
		m, err := pusher.Decode(payload)
		if err != nil {
			continue
		}
		events = append(events, historyEvent{Offset: e.Offset, Event: m.Event, Channel: m.Channel, Data: m.Data, PublishedAt: e.At})
	}
	missing := uint64(0)
	if len(page.Entries) > 0 && page.Entries[0].Offset > since+1 {
		missing = page.Entries[0].Offset - since - 1
	} else if len(page.Entries) == 0 && page.Latest.Offset > since {
		missing = page.Latest.Offset - since
	}
	writeJSON(w, http.StatusOK, map[string]any{"epoch": page.Latest.Epoch, "latest": page.Latest.Offset, "missing": missing, "events": events})
}

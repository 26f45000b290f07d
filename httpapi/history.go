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
	page, err := s.node.History(q.r.Context(), q.app.ID, name, since, limit)
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
	gaps, missing := missingOffsets(since, page, events)
	writeJSON(w, http.StatusOK, map[string]any{"epoch": page.Latest.Epoch, "latest": page.Latest.Offset, "missing": missing,
		"missing_offsets": gaps, "events": events})
}

// offsetRange is a run of missing offsets, from and to included.
type offsetRange struct {
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
}

// missingOffsets are the offsets after since, up to what the read covered, that events does
// not have (aged out, lost or refused), as ranges, and how many they are.
func missingOffsets(since uint64, page herald.HistoryPage, events []historyEvent) ([]offsetRange, uint64) {
	through := page.Through
	if through == 0 {
		through = page.Latest.Offset
	}
	gaps := []offsetRange{}
	var n uint64
	next := since + 1
	add := func(to uint64) {
		if to >= next {
			gaps = append(gaps, offsetRange{next, to})
			n += to - next + 1
		}
	}
	for _, e := range events {
		add(e.Offset - 1)
		next = e.Offset + 1
	}
	add(through)
	return gaps, n
}

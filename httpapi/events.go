package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/pusher"
)

// eventBody is one event of POST /events or of a batch.
type eventBody struct {
	pusher.EventBody
	Info string `json:"info"`
}

// validate checks one event of a REST call against the app's limits and returns its
// channels (repeats removed) and data. The shape of the body is checked here; the event
// itself by pusher.ValidateEvent, which every publisher shares.
func validate(app *herald.App, e *eventBody, batch bool) ([]string, string, error) {
	chans, err := e.Targets()
	if err != nil {
		return nil, "", err
	}
	if batch && len(e.Channels) > 0 {
		return nil, "", herald.Errorf(herald.CodeInvalid, "batch events take one channel each")
	}
	if len(chans) == 0 {
		return nil, "", herald.Errorf(herald.CodeInvalid, "channel or channels is required")
	}
	data, err := pusher.EventData(e.Data)
	if err != nil {
		return nil, "", err
	}
	chans, err = pusher.ValidateEvent(e.Name, chans, data, e.SocketID, app.Limits)
	if err != nil {
		return nil, "", err
	}
	return chans, data, nil
}

func decodeBody(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return herald.Errorf(herald.CodeInvalid, "invalid JSON body: %v", err)
	}
	return nil
}

func (s *Server) events(w http.ResponseWriter, q *request) {
	var e eventBody
	if err := decodeBody(q.body, &e); err != nil {
		writeError(w, err)
		return
	}
	chans, data, err := validate(q.app, &e, false)
	if err != nil {
		writeError(w, err)
		return
	}
	// One call for every channel: a refused event (503) reached none of them.
	evs := make([]herald.Event, len(chans))
	for i, ch := range chans {
		evs[i] = herald.Event{Name: e.Name, Channel: ch, Data: data, SocketID: e.SocketID}
	}
	if err := s.hub.Publish(q.app.ID, evs...); err != nil {
		writeError(w, err)
		return
	}
	if e.Info == "" {
		writeJSON(w, http.StatusOK, struct{}{})
		return
	}
	out := map[string]map[string]int{}
	for _, ch := range chans {
		out[ch] = s.channelInfo(q.app.ID, ch, e.Info)
	}
	writeJSON(w, http.StatusOK, map[string]any{"channels": out})
}

func (s *Server) batchEvents(w http.ResponseWriter, q *request) {
	var b struct {
		Batch []eventBody `json:"batch"`
	}
	if err := decodeBody(q.body, &b); err != nil {
		writeError(w, err)
		return
	}
	if len(b.Batch) == 0 {
		writeError(w, herald.Errorf(herald.CodeInvalid, "batch is required and must hold at least one event"))
		return
	}
	if most := q.app.Limits.WithDefaults().MaxBatchSize; len(b.Batch) > most {
		writeError(w, herald.Errorf(herald.CodeInvalid, "batch of %d events is over the limit of %d", len(b.Batch), most))
		return
	}
	datas := make([]string, len(b.Batch))
	for i := range b.Batch {
		_, data, err := validate(q.app, &b.Batch[i], true)
		if err != nil {
			writeError(w, herald.Errorf(herald.CodeOf(err), "batch[%d]: %s", i, herald.MessageOf(err)))
			return
		}
		datas[i] = data
	}
	// One call for the whole batch: a refused batch (503) delivered none of its events.
	withInfo := false
	evs := make([]herald.Event, len(b.Batch))
	for i, e := range b.Batch {
		evs[i] = herald.Event{Name: e.Name, Channel: e.Channel, Data: datas[i], SocketID: e.SocketID}
		withInfo = withInfo || e.Info != ""
	}
	if err := s.hub.Publish(q.app.ID, evs...); err != nil {
		writeError(w, err)
		return
	}
	if !withInfo {
		writeJSON(w, http.StatusOK, struct{}{})
		return
	}
	out := make([]map[string]int, len(b.Batch))
	for i, e := range b.Batch {
		out[i] = s.channelInfo(q.app.ID, e.Channel, e.Info)
	}
	writeJSON(w, http.StatusOK, map[string]any{"batch": out})
}

// channelInfo returns the attributes info asks for: subscription_count, and user_count for
// presence channels.
func (s *Server) channelInfo(appID, ch, info string) map[string]int {
	st, _ := s.hub.Channel(appID, ch)
	out := map[string]int{}
	for _, attr := range strings.Split(info, ",") {
		switch strings.TrimSpace(attr) {
		case "subscription_count":
			out["subscription_count"] = st.SubscriptionCount
		case "user_count":
			if herald.Classify(ch).Kind == herald.Presence {
				out["user_count"] = st.UserCount
			}
		}
	}
	return out
}

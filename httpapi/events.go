package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/pusher"
)

// eventBody is one event of POST /events or of a batch.
type eventBody struct {
	pusher.EventBody
	Info string `json:"info"`
	// Key is the event's idempotency key (herald.Event.Key); nil: none.
	Key *string `json:"idempotency_key"`
}

// keyHeader is the request header that carries an idempotency key for the whole call.
const keyHeader = "X-Idempotency-Key"

// requestKey returns the idempotency key of the request's header, "" without one, or a
// CodeInvalid error naming the header.
func requestKey(r *http.Request) (string, error) {
	vs := r.Header.Values(keyHeader)
	switch {
	case len(vs) == 0:
		return "", nil
	case len(vs) > 1:
		return "", herald.Errorf(herald.CodeInvalid, "%s header given %d times: give it once", keyHeader, len(vs))
	}
	if err := herald.ValidKey(keyHeader+" header", vs[0]); err != nil {
		return "", err
	}
	return vs[0], nil
}

// eventKey is the idempotency key of e, the event at index i of a batch (-1: not a batch): its
// own idempotency_key, else the request's key (followed, in a batch, by "/" and the index, so
// that each event of the batch has its own), else none.
func eventKey(e *eventBody, reqKey string, i int) (string, error) {
	if e.Key != nil {
		what := "idempotency_key"
		if i >= 0 {
			what = "batch[" + strconv.Itoa(i) + "].idempotency_key"
		}
		if err := herald.ValidKey(what, *e.Key); err != nil {
			return "", err
		}
		return *e.Key, nil
	}
	if reqKey == "" || i < 0 {
		return reqKey, nil
	}
	return reqKey + "/" + strconv.Itoa(i), nil
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
	reqKey, err := requestKey(q.r)
	if err != nil {
		writeError(w, err)
		return
	}
	key, err := eventKey(&e, reqKey, -1)
	if err != nil {
		writeError(w, err)
		return
	}
	// One call for every channel: a refused event (503) reached none of them. With a key,
	// each channel keeps it: a retry delivers to none that had the event.
	evs := make([]herald.Event, len(chans))
	for i, ch := range chans {
		evs[i] = herald.Event{Name: e.Name, Channel: ch, Data: data, SocketID: e.SocketID, Key: key}
	}
	if err := s.node.Publish(q.app.ID, evs...); err != nil {
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
	reqKey, err := requestKey(q.r)
	if err != nil {
		writeError(w, err)
		return
	}
	datas, keys := make([]string, len(b.Batch)), make([]string, len(b.Batch))
	for i := range b.Batch {
		_, data, err := validate(q.app, &b.Batch[i], true)
		if err != nil {
			writeError(w, herald.Errorf(herald.CodeOf(err), "batch[%d]: %s", i, herald.MessageOf(err)))
			return
		}
		if keys[i], err = eventKey(&b.Batch[i], reqKey, i); err != nil {
			writeError(w, err)
			return
		}
		datas[i] = data
	}
	// One call for the whole batch: a refused batch (503) delivered none of its events.
	withInfo := false
	evs := make([]herald.Event, len(b.Batch))
	for i, e := range b.Batch {
		evs[i] = herald.Event{Name: e.Name, Channel: e.Channel, Data: datas[i], SocketID: e.SocketID, Key: keys[i]}
		withInfo = withInfo || e.Info != ""
	}
	if err := s.node.Publish(q.app.ID, evs...); err != nil {
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
	st, _ := s.node.Channel(appID, ch)
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

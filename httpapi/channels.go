package httpapi

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/pusher"
)

func infoAttrs(q *request) (sub, users bool, err error) {
	for _, a := range strings.Split(q.r.URL.Query().Get("info"), ",") {
		switch strings.TrimSpace(a) {
		case "":
		case "subscription_count":
			sub = true
		case "user_count":
			users = true
		case "cache":
		default:
			return false, false, herald.Errorf(herald.CodeInvalid, "unknown info attribute %q", a)
		}
	}
	return sub, users, nil
}

func (s *Server) channels(w http.ResponseWriter, q *request) {
	prefix := q.r.URL.Query().Get("filter_by_prefix")
	sub, users, err := infoAttrs(q)
	if err != nil {
		writeError(w, err)
		return
	}
	if users && !strings.HasPrefix(prefix, "presence-") {
		writeError(w, herald.Errorf(herald.CodeInvalid, "info=user_count needs filter_by_prefix=presence-"))
		return
	}
	stats := s.node.Channels(q.app.ID, prefix)
	slices.SortFunc(stats, func(a, b herald.ChannelStat) int { return strings.Compare(a.Name, b.Name) })
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(appendChannels(make([]byte, 0, 16+len(stats)*(len(prefix)+48)), stats, sub, users))
}

// appendChannels appends the GET /channels body for stats, in their order, written directly
// rather than through a map per channel and encoding/json: a cluster may list tens of
// thousands of channels.
func appendChannels(b []byte, stats []herald.ChannelStat, sub, users bool) []byte {
	b = append(b, `{"channels":{`...)
	for i, st := range stats {
		if i > 0 {
			b = append(b, ',')
		}
		b = pusher.AppendString(b, st.Name)
		b = append(b, ":{"...)
		if sub {
			b = append(b, `"subscription_count":`...)
			b = strconv.AppendInt(b, int64(st.SubscriptionCount), 10)
		}
		if users {
			if sub {
				b = append(b, ',')
			}
			b = append(b, `"user_count":`...)
			b = strconv.AppendInt(b, int64(st.UserCount), 10)
		}
		b = append(b, '}')
	}
	return append(b, "}}\n"...)
}

func (s *Server) channel(w http.ResponseWriter, q *request) {
	name := q.r.PathValue("name")
	sub, users, err := infoAttrs(q)
	if err != nil {
		writeError(w, err)
		return
	}
	isPresence := herald.Classify(name).Kind == herald.Presence
	if users && !isPresence {
		writeError(w, herald.Errorf(herald.CodeInvalid, "info=user_count is only for presence channels"))
		return
	}
	st, occupied := s.node.Channel(q.app.ID, name)
	out := map[string]any{"occupied": occupied}
	if sub {
		out["subscription_count"] = st.SubscriptionCount
	}
	if users {
		out["user_count"] = st.UserCount
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) users(w http.ResponseWriter, q *request) {
	name := q.r.PathValue("name")
	if herald.Classify(name).Kind != herald.Presence {
		writeError(w, herald.Errorf(herald.CodeInvalid, "users are only listed for presence channels"))
		return
	}
	ids := s.node.Users(q.app.ID, name)
	list := make([]map[string]string, len(ids))
	for i, id := range ids {
		list[i] = map[string]string{"id": id}
	}
	writeJSON(w, http.StatusOK, map[string]any{"users": list})
}

func (s *Server) terminate(w http.ResponseWriter, q *request) {
	s.node.TerminateUser(q.app.ID, q.r.PathValue("uid"))
	writeJSON(w, http.StatusOK, struct{}{})
}

package pusher

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/herald-rt/herald"
)

func TestDecodePresenceData(t *testing.T) {
	tests := []struct {
		in       string
		id, info string
	}{
		{`{"user_id":"ada","user_info":{"name":"Ada"}}`, "ada", `{"name":"Ada"}`},
		{`{"user_id":10,"user_info":{"name":"Mr. Channels"}}`, "10", `{"name":"Mr. Channels"}`},
		{`{"user_id":"10"}`, "10", ``},
		{`{"user_id":"x","user_info":null}`, "x", ``},
		{`{"user_id":"x","user_info":"just a string"}`, "x", `"just a string"`},
		{`{"user_id":-7}`, "-7", ``},
		{`{"user_id":-0}`, "0", ``},
		{`{"user_id":12345678901234567890123}`, "12345678901234567890123", ``},
		{`{"user_id":10.0}`, "10", ``},
		{`{"user_id":1.5}`, "1.5", ``},
		{`{"user_id":1e3}`, "1000", ``},
		{`{"user_id":0.000001}`, "0.000001", ``},
		{`{"user_id":0e5}`, "0", ``},
		{`{"user_id":"\u00e9t\u00e9"}`, "été", ``},
	}
	for _, tt := range tests {
		m, err := DecodePresenceData(tt.in)
		if err != nil {
			t.Errorf("DecodePresenceData(%s): %v", tt.in, err)
			continue
		}
		if m.UserID != tt.id || string(m.Info) != tt.info {
			t.Errorf("DecodePresenceData(%s) = {%q %s}, want {%q %s}", tt.in, m.UserID, m.Info, tt.id, tt.info)
		}
	}
	errs := []struct{ in, msg string }{
		{``, "channel_data is missing"},
		{`{`, "not valid JSON"},
		{`"x"`, "must be a JSON object"},
		{`{}`, "has no user_id"},
		{`{"user_id":null}`, "has no user_id"},
		{`{"user_id":""}`, "user_id is empty"},
		{`{"user_id":true}`, "string or a number"},
		{`{"user_id":{"id":1}}`, "string or a number"},
		{`{"user_id":1e21}`, "out of range"},
		{`{"user_id":1e-7}`, "out of range"},
		{`{"user_id":1e400}`, "out of range"},
	}
	for _, tt := range errs {
		_, err := DecodePresenceData(tt.in)
		if err == nil {
			t.Errorf("DecodePresenceData(%s) succeeded", tt.in)
			continue
		}
		wantErr(t, err, herald.CodeInvalid, tt.msg)
	}
}

func TestDecodeUserData(t *testing.T) {
	u, err := DecodeUserData(`{"id":"12345","user_info":{"name":"Ada"},"watchlist":["a","b"]}`)
	if err != nil {
		t.Fatal(err)
	}
	if u.ID != "12345" || string(u.Info) != `{"name":"Ada"}` || !slices.Equal(u.Watchlist, []string{"a", "b"}) {
		t.Fatalf("DecodeUserData = %+v", u)
	}
	u, err = DecodeUserData(`{"id":"1","watchlist":null,"user_info":null}`)
	if err != nil || u.ID != "1" || u.Info != nil || u.Watchlist != nil {
		t.Fatalf("DecodeUserData with nulls = %+v, %v", u, err)
	}
	errs := []struct{ in, msg string }{
		{``, "user_data is missing"},
		{`nope`, "not valid JSON"},
		{`[]`, "must be a JSON object"},
		{`{}`, "has no id"},
		{`{"id":""}`, "has no id"},
		{`{"id":12345}`, "id must be a string"},
		{`{"id":"1","watchlist":"2"}`, "watchlist must be an array of strings"},
		{`{"id":"1","watchlist":[2]}`, "watchlist must be an array of strings"},
		{`{"id":"1","watchlist":[` + strings.Repeat(`"u",`, MaxWatchlist) + `"u"]}`, "watchlist has 101 user ids, at most 100"},
	}
	for _, tt := range errs {
		_, err := DecodeUserData(tt.in)
		if err == nil {
			t.Errorf("DecodeUserData(%s) succeeded", tt.in)
			continue
		}
		wantErr(t, err, herald.CodeInvalid, tt.msg)
	}
}

func TestDecodeUserDataWatchlistOfMaxSize(t *testing.T) {
	ids := make([]string, MaxWatchlist)
	for i := range ids {
		ids[i] = `"u` + strconv.Itoa(i) + `"`
	}
	u, err := DecodeUserData(`{"id":"1","watchlist":[` + strings.Join(ids, ",") + `]}`)
	if err != nil || len(u.Watchlist) != MaxWatchlist {
		t.Fatalf("a watchlist of %d: %d ids, %v", MaxWatchlist, len(u.Watchlist), err)
	}
}

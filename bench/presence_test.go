package bench

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald"
)

// checkPresence checks a clean presence run of 25 members in channels of 10 (10, 10 and 5).
func checkPresence(t *testing.T, rep *PresenceReport, nodes int) {
	t.Helper()
	if rep.Setup.Established != 25 || rep.Joined != 25 || rep.Channels != 3 || rep.JoinsPerSec <= 0 || rep.JoinLatency.Count != 25 {
		t.Fatalf("setup %+v, joined %d in %d channels at %.0f/s, latency %+v; want 25 in 3", rep.Setup, rep.Joined, rep.Channels, rep.JoinsPerSec, rep.JoinLatency)
	}
	// Each member sees the others of its channel: 10×9 + 10×9 + 5×4.
	if m := rep.Members; m.Expected != 200 || m.Seen != 200 || !m.Clean() || !m.Complete {
		t.Fatalf("members %+v; want 200 of 200, clean", m)
	}
	if s := rep.Snapshots; s.Received != 25 || s.Inconsistent != 0 || s.MinMembers < 1 || s.MaxMembers > 10 {
		t.Fatalf("snapshots %+v; want 25 consistent, 1 to 10 members", s)
	}
	if c := rep.Counts; c == nil || !c.OK || len(c.Nodes) != nodes || !strings.Contains(c.Request, "info=user_count") {
		t.Fatalf("user counts %+v; want them right on %d nodes", c, nodes)
	}
	if c := rep.AfterLeave; c == nil || !c.OK || len(c.Nodes) != nodes {
		t.Fatalf("after leave %+v; want no channel on %d nodes", c, nodes)
	}
	if rep.ServerUsage == nil || !rep.Clean() { // CPU time is read in 10 ms ticks: it may be 0 here
		t.Fatalf("server usage %+v, %.1f us per join, clean %v", rep.ServerUsage, rep.ServerCPUPerJoinUs, rep.Clean())
	}
	checkText(t, rep, "presence: 25 members in 3 channels of 10", "25 joined in", "200 of 200 seen (100.00%): missing 0, duplicated 0",
		"every channel listed with its user count after", "no channel listed after", "us per join")
	checkJSON(t, rep, "joins_per_sec")
}

func TestPresence(t *testing.T) {
	target := startHerald(t, nil)
	rep, err := Presence(t.Context(), PresenceConfig{Target: target, Clients: 25, PerChannel: 10, Wait: patience, Settle: patience})
	if err != nil {
		t.Fatal(err)
	}
	checkPresence(t, rep, 1)
}

// TestPresenceTwoNodes: every channel's members are spread over two nodes of a cluster
// (client i on node i mod 2); each member sees every other, whatever its node, and both
// nodes report the cluster's user counts.
func TestPresenceTwoNodes(t *testing.T) {
	target, _ := twoNodes(t)
	rep, err := Presence(t.Context(), PresenceConfig{Target: target, Clients: 25, PerChannel: 10, Wait: patience, Settle: patience})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Setup.PerNode, []int{13, 12}) {
		t.Fatalf("per node %v; want 13 and 12", rep.Setup.PerNode)
	}
	checkPresence(t, rep, 2)
	if u := rep.ServerUsage; len(u.Nodes) != 2 {
		t.Fatalf("server usage %+v; want both nodes", u)
	}
}

// TestPresenceFull: a channel fuller than the server allows (Pusher's 100 members) fails the
// joins over the limit; the run says so and is not clean.
func TestPresenceFull(t *testing.T) {
	target := startHerald(t, nil)
	limits := herald.DefaultLimits
	rep, err := Presence(t.Context(), PresenceConfig{Target: target, Clients: 105, PerChannel: 105, Wait: patience, Settle: patience})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Joined != limits.MaxPresenceMembers || rep.Setup.Failed != 105-limits.MaxPresenceMembers || rep.Clean() {
		t.Fatalf("joined %d, setup %+v, clean %v; want %d joined and the rest refused", rep.Joined, rep.Setup, rep.Clean(), limits.MaxPresenceMembers)
	}
	if !strings.Contains(rep.Setup.FirstError, "subscription_error") || !rep.Members.Clean() || !rep.Counts.OK {
		t.Fatalf("first error %q, members %+v, counts %+v; want the refusal, and the members who joined all seen", rep.Setup.FirstError, rep.Members, rep.Counts)
	}
}

// TestMembersCount: what a member sees is counted exactly: a member seen in the snapshot and
// again in a member_added is a duplicate, a user of another channel or an unknown id is
// unexpected, a member never seen is missing, a member_removed before anyone left counts,
// and one after the generator began closing does not.
func TestMembersCount(t *testing.T) {
	m := newMembers(6, 3, "k", "s") // channels 0: u0 u1 u2, 1: u3 u4 u5
	snap := func(i int, ids ...string) {
		data := `{"presence":{"ids":["` + strings.Join(ids, `","`) + `"],"hash":{`
		for k, id := range ids {
			if k > 0 {
				data += ","
			}
			data += `"` + id + `":null`
		}
		data += `},"count":` + string(rune('0'+len(ids))) + `}}`
		q, _ := json.Marshal(data)
		m.snapshot(i, q, time.Millisecond, time.Now())
	}
	added := func(i int, id string) {
		m.observe(&client{index: int32(i)}, []byte(`{"event":"pusher_internal:member_added","channel":"presence-bench-0","data":"{\"user_id\":\"`+id+`\",\"user_info\":null}"}`))
	}
	removed := func(i int, id string) {
		m.observe(&client{index: int32(i)}, []byte(`{"event":"pusher_internal:member_removed","channel":"presence-bench-0","data":"{\"user_id\":\"`+id+`\"}"}`))
	}
	snap(0, "u0")
	added(0, "u1")
	added(0, "u2")
	added(0, "u2") // duplicate
	snap(1, "u0", "u1")
	added(1, "u0") // duplicate: in its snapshot
	// u1 never sees u2: missing
	snap(2, "u0", "u1", "u2")
	added(2, "u3")   // of channel 1: unexpected
	added(2, "bob")  // unknown: unexpected
	removed(2, "u0") // nobody left yet
	snap(3, "u3")    // u4 and u5 failed to join
	snap(4, "u4")    // joined as far as the server knows, but its dial failed after
	added(3, "u4")   // u4 is not in joined: unexpected
	snap(5, "u0")    // without itself: inconsistent
	joined := []bool{true, true, true, true, false, false}
	if m.converged(joined, m.joinedCounts(joined)) {
		t.Fatal("converged; u1 never saw u2")
	}
	m.leaving.Store(true)
	removed(2, "u1") // after the generator began closing: not counted
	got := m.count(joined)
	want := Members{Expected: 6, Seen: 5, Missing: 1, Duplicated: 2, Unexpected: 3, Removed: 1}
	if got != want {
		t.Fatalf("count %+v; want %+v", got, want)
	}
	if s := m.snapshots; s.Received != 6 || s.Inconsistent != 1 || s.MinMembers != 1 || s.MaxMembers != 3 || !strings.Contains(s.FirstProblem, "without the member itself (u5)") {
		t.Fatalf("snapshots %+v; want 6, one without itself", s)
	}
}

func TestMemberID(t *testing.T) {
	for _, c := range []struct {
		msg, want string
		ok        bool
	}{
		{`{"event":"pusher_internal:member_added","channel":"c","data":"{\"user_id\":\"u42\",\"user_info\":{}}"}`, "u42", true},
		{`{"event":"pusher_internal:member_removed","data":"{\"user_id\":\"u7\"}","channel":"c"}`, "u7", true},
		{`{"event":"pusher_internal:member_added","data":"{\"user_id\": \"u9\"}"}`, "u9", true}, // not herald's form
		{`{"event":"pusher_internal:member_added","data":"{\"user_id\":\"u12x\"}"}`, "u12x", true},
		{`{"event":"pusher_internal:member_added","data":{"user_id":"u3"}}`, "u3", true}, // data as an object
		{`{"event":"pusher_internal:member_added","data":"{}"}`, "", false},
	} {
		if got, ok := memberID([]byte(c.msg)); got != c.want || ok != c.ok {
			t.Errorf("memberID(%s) = %q, %v; want %q, %v", c.msg, got, ok, c.want, c.ok)
		}
	}
}

func TestWrongUserCounts(t *testing.T) {
	n := func(v int) *int { return &v }
	names, counts := []string{"a", "b", "c"}, []int{2, 1, 0}
	for _, c := range []struct {
		list map[string]channelInfo
		want string
	}{
		{map[string]channelInfo{"a": {UserCount: n(2)}, "b": {UserCount: n(1)}}, ""},
		{map[string]channelInfo{"a": {UserCount: n(2)}}, "b not listed"},
		{map[string]channelInfo{"a": {UserCount: n(1)}, "b": {UserCount: n(1)}}, "a has user_count 1; 2 joined"},
		{map[string]channelInfo{"a": {}, "b": {UserCount: n(1)}}, "a without a user_count"},
		{map[string]channelInfo{"a": {UserCount: n(2)}, "b": {UserCount: n(1)}, "c": {UserCount: n(0)}}, "3 channels listed; 2 joined"},
	} {
		if got := wrongUserCounts(c.list, names, counts); (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("wrongUserCounts(%v) = %q; want %q", c.list, got, c.want)
		}
	}
}

// TestChannels: the REST node lists every channel, whichever node its subscriber is on.
func TestChannels(t *testing.T) {
	for _, c := range []struct {
		name   string
		target func(t *testing.T) Target
	}{
		{"one node", func(t *testing.T) Target { return startHerald(t, nil) }},
		{"two nodes", func(t *testing.T) Target { target, _ := twoNodes(t); return target }},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep, err := Channels(t.Context(), ChannelsConfig{Target: c.target(t), Channels: 30, Requests: 5, Settle: patience})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Clean() || rep.Setup.Established != 30 || rep.LastCount != 30 || rep.Latency.Count != 5 || rep.ResponseBytes == 0 || rep.ServerUsage == nil {
				t.Fatalf("report %+v; want 30 channels listed in 5 answers", rep)
			}
			checkText(t, rep, "channels: 30 channels with one subscriber each, 5 GET /apps/app-id/channels", "all 30 channels listed after",
				"answers      5, 0 not listing exactly 30 channels; the last listed 30", "us per request")
			checkJSON(t, rep, "requests_per_sec")
		})
	}
}

// TestChannelsNeverListed: a REST node that never lists the channels fails the check within
// the settle time, and times nothing.
func TestChannelsNeverListed(t *testing.T) {
	empty := func(api http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/channels") {
				w.Write([]byte(`{"channels":{}}`))
				return
			}
			api.ServeHTTP(w, r)
		})
	}
	target := startHerald(t, empty)
	rep, err := Channels(t.Context(), ChannelsConfig{Target: target, Channels: 3, Requests: 5, Settle: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Clean() || rep.Listed.OK || rep.Latency.Count != 0 || !strings.Contains(rep.Listed.Last, "0 channels listed; 3 subscribed") {
		t.Fatalf("report %+v; want the listing check failed", rep)
	}
	checkText(t, rep, "NOT all 3 channels listed after")
}

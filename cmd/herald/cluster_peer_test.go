package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/pusher"
)

// peer is a raw WebSocket client of one node, signed in to nothing until it says so. A
// goroutine records every message it gets, with the time it arrived, until the connection
// closes: tests read what came in order (wait) and, to prove that something did not come,
// everything at once (history) once a marker has come after it.
type peer struct {
	name string // "u1@node-a", for failures
	node *node
	app  *herald.App
	user string
	sid  string
	c    *wstest.Client

	mu   sync.Mutex
	got  []received
	more chan struct{} // a token after each message, and when the reader ends
	done chan struct{} // closed when the reader has returned
	seen int           // how far wait has read got
}

// received is one message with its arrival time. Close is set for a close frame.
type received struct {
	wstest.Message
	at time.Time
}

// connectPeer opens a connection to n as a client of app; user is the user id it presents
// in presence channels and sign-in.
func connectPeer(t *testing.T, n *node, app *herald.App, user string) *peer {
	t.Helper()
	c, err := wstest.Dial(n.api, "/app/"+app.Key+"?protocol=7")
	if err != nil {
		t.Fatalf("%s: dial: %v", n.name, err)
	}
	sid, err := c.SocketID(clusterWait)
	if err != nil {
		c.Close()
		t.Fatalf("%s: %v", n.name, err)
	}
	p := &peer{name: user + "@" + n.name, node: n, app: app, user: user, sid: sid, c: c,
		more: make(chan struct{}, 1), done: make(chan struct{})}
	go p.read()
	t.Cleanup(p.close)
	return p
}

func (p *peer) read() {
	defer close(p.done)
	defer p.signal()
	for {
		m, err := p.c.Read(time.Hour) // until the connection closes
		if err != nil {
			return
		}
		p.mu.Lock()
		p.got = append(p.got, received{m, time.Now()})
		p.mu.Unlock()
		p.signal()
		if m.Close != 0 {
			return
		}
	}
}

func (p *peer) signal() {
	select {
	case p.more <- struct{}{}:
	default:
	}
}

// close closes the connection, as a client that goes away does, and waits for the reader.
func (p *peer) close() {
	p.c.Close()
	<-p.done
}

func (p *peer) send(t *testing.T, v any) {
	t.Helper()
	if err := p.c.WriteJSON(v); err != nil {
		t.Fatalf("%s: write: %v", p.name, err)
	}
}

// history returns every message received so far.
func (p *peer) history() []received {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.got)
}

// wait returns the next message, after those wait returned before, that match accepts; it
// fails the test when none comes within clusterWait or the connection ends first.
func (p *peer) wait(t *testing.T, what string, match func(wstest.Message) bool) received {
	t.Helper()
	deadline := time.NewTimer(clusterWait)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		for i := p.seen; i < len(p.got); i++ {
			if match(p.got[i].Message) {
				p.seen = i + 1
				m := p.got[i]
				p.mu.Unlock()
				return m
			}
		}
		p.seen = len(p.got)
		p.mu.Unlock()
		select {
		case <-p.done:
			p.mu.Lock()
			rest := len(p.got) > p.seen
			p.mu.Unlock()
			if !rest {
				t.Fatalf("%s: the connection ended while waiting for %s; it got:\n%s", p.name, what, p.dump())
			}
		case <-p.more:
		case <-deadline.C:
			t.Fatalf("%s: waited %v for %s; it got:\n%s", p.name, clusterWait, what, p.dump())
		}
	}
}

// dump lists what p received, one message a line, for failures: the last 200.
func (p *peer) dump() string {
	var b strings.Builder
	h := p.history()
	if len(h) > 200 {
		fmt.Fprintf(&b, "  (%d messages before)\n", len(h)-200)
		h = h[len(h)-200:]
	}
	for _, m := range h {
		if m.Close != 0 {
			fmt.Fprintf(&b, "  %s close %d\n", m.at.Format("15:04:05.000"), m.Close)
			continue
		}
		fmt.Fprintf(&b, "  %s %s %s %s\n", m.at.Format("15:04:05.000"), m.Event, m.Channel, m.DataString())
	}
	return b.String()
}

// event matches a message named name on channel.
func event(name, channel string) func(wstest.Message) bool {
	return func(m wstest.Message) bool { return m.Event == name && m.Channel == channel }
}

// memberEvent matches pusher_internal:member_added or member_removed (ev) for user on channel.
func memberEvent(ev, channel, user string) func(wstest.Message) bool {
	return func(m wstest.Message) bool {
		return m.Event == "pusher_internal:"+ev && m.Channel == channel && memberID(m) == user
	}
}

// memberID is the user_id of a member_added or member_removed.
func memberID(m wstest.Message) string {
	var d struct {
		UserID string `json:"user_id"`
	}
	_ = json.Unmarshal([]byte(m.DataString()), &d)
	return d.UserID
}

// presenceSub subscribes p to a presence channel as its user, signed with its app's secret;
// the user's info is {"name":user}.
func (p *peer) presenceSub(t *testing.T, channel string) {
	t.Helper()
	data := `{"user_id":"` + p.user + `","user_info":{"name":"` + p.user + `"}}`
	auth := p.app.Key + ":" + pusher.Sign(p.app.Secret, p.sid+":"+channel+":"+data)
	if err := p.c.Subscribe(channel, auth, data); err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
}

// join subscribes p to a presence channel and returns the member ids its
// subscription_succeeded lists, checking that list's count and hash agree with them.
func (p *peer) join(t *testing.T, channel string) []string {
	t.Helper()
	p.presenceSub(t, channel)
	m := p.wait(t, "subscription_succeeded on "+channel, func(m wstest.Message) bool {
		if m.Event == "pusher:subscription_error" && m.Channel == channel {
			t.Fatalf("%s: subscription_error on %s: %s", p.name, channel, m.DataString())
		}
		return event("pusher_internal:subscription_succeeded", channel)(m)
	})
	return presenceIDs(t, p.name, m.Message)
}

// presenceIDs returns the sorted ids of a presence subscription_succeeded, failing unless its
// hash holds exactly those ids, each with info {"name":id}, and its count is their number.
func presenceIDs(t *testing.T, who string, m wstest.Message) []string {
	t.Helper()
	var d struct {
		Presence struct {
			IDs   []string                   `json:"ids"`
			Hash  map[string]json.RawMessage `json:"hash"`
			Count int                        `json:"count"`
		} `json:"presence"`
	}
	if err := json.Unmarshal([]byte(m.DataString()), &d); err != nil {
		t.Fatalf("%s: subscription_succeeded data %s: %v", who, m.DataString(), err)
	}
	ids := slices.Sorted(slices.Values(d.Presence.IDs))
	ok := d.Presence.Count == len(ids) && len(d.Presence.Hash) == len(ids) && len(slices.Compact(slices.Clone(ids))) == len(ids)
	for _, id := range ids {
		ok = ok && string(d.Presence.Hash[id]) == `{"name":"`+id+`"}`
	}
	if !ok {
		t.Fatalf("%s: inconsistent presence in subscription_succeeded: %s", who, m.DataString())
	}
	return ids
}

// memberCounts counts the member_added and member_removed p received on channel, by user.
func (p *peer) memberCounts(channel string) (added, removed map[string]int) {
	added, removed = map[string]int{}, map[string]int{}
	for _, m := range p.history() {
		switch {
		case m.Channel != channel:
		case m.Event == "pusher_internal:member_added":
			added[memberID(m.Message)]++
		case m.Event == "pusher_internal:member_removed":
			removed[memberID(m.Message)]++
		}
	}
	return added, removed
}

// view is the member list p's client would hold for channel: its subscription_succeeded's,
// then each member_added and member_removed applied in order. It fails the test on a
// member_added for a member p's client holds already, or a member_removed for one it does
// not hold: each would be one too many.
func (p *peer) view(t *testing.T, channel string) []string {
	t.Helper()
	set := map[string]bool{}
	for _, m := range p.history() {
		id := memberID(m.Message)
		switch {
		case m.Channel != channel:
		case m.Event == "pusher_internal:subscription_succeeded":
			clear(set)
			for _, id := range presenceIDs(t, p.name, m.Message) {
				set[id] = true
			}
		case m.Event == "pusher_internal:member_added":
			if set[id] {
				t.Errorf("%s: member_added %s at %s, a member already; it got:\n%s", p.name, id, m.at.Format("15:04:05.000"), p.dump())
			}
			set[id] = true
		case m.Event == "pusher_internal:member_removed":
			if !set[id] {
				t.Errorf("%s: member_removed %s at %s, not a member; it got:\n%s", p.name, id, m.at.Format("15:04:05.000"), p.dump())
			}
			delete(set, id)
		}
	}
	return slices.Sorted(func(yield func(string) bool) {
		for id := range set {
			if !yield(id) {
				return
			}
		}
	})
}

// marker publishes event "tick" with a unique data on channel (of the peers' app) through n
// and waits until every peer has it: whatever the nodes sent those peers before it has
// arrived. It publishes again every attemptWait (the first may go out before a node's
// interest is on the bus).
func marker(t *testing.T, n *node, channel string, peers ...*peer) {
	t.Helper()
	app := peers[0].app
	data := fmt.Sprintf("marker %s %d", n.name, time.Now().UnixNano())
	isMarker := func(m wstest.Message) bool {
		return m.Event == "tick" && m.Channel == channel && m.DataString() == data
	}
	has := func(p *peer) bool {
		return slices.ContainsFunc(p.history(), func(m received) bool { return isMarker(m.Message) })
	}
	poll.NoError(t, clusterWait, "marker "+data+" to reach every peer", func() error {
		body, _ := json.Marshal(map[string]string{"name": "tick", "channel": channel, "data": data})
		if status, b, err := n.rest(app, "POST", "/apps/"+app.ID+"/events", nil, body); err != nil || status != http.StatusOK {
			return fmt.Errorf("publish: %d %s %v", status, b, err)
		}
		for end := time.Now().Add(attemptWait); ; {
			var missing []string
			for _, p := range peers {
				if !has(p) {
					missing = append(missing, p.name)
				}
			}
			if len(missing) == 0 {
				return nil
			}
			if time.Now().After(end) {
				return fmt.Errorf("not yet at %s", strings.Join(missing, ", "))
			}
			time.Sleep(10 * time.Millisecond) // the pace of checking the peers' records
		}
	})
}

// rest makes a REST call to n signed for app; query holds the call's own parameters.
func (n *node) rest(app *herald.App, method, path string, query url.Values, body []byte) (int, []byte, error) {
	select {
	case <-n.done:
		return 0, nil, fmt.Errorf("%s exited: %v", n.name, n.err)
	default:
	}
	q := pusher.SignRequest(app, method, path, query, body, time.Now())
	req, err := http.NewRequest(method, "http://"+n.api+path+"?"+q.Encode(), strings.NewReader(string(body)))
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := n.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// restJSON makes a REST call and decodes its 200 answer into v.
func (n *node) restJSON(app *herald.App, method, path string, query url.Values, body []byte, v any) error {
	status, b, err := n.rest(app, method, path, query, body)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", method, path, status, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s %s: %v in %s", method, path, err, b)
	}
	return nil
}

// occupancy is what REST says of one channel: the subscriptions and, for a presence channel,
// the users.
type occupancy struct {
	subs  int
	users []string // sorted; nil for a channel that is not a presence channel
}

func (o occupancy) String() string {
	if o.users == nil {
		return fmt.Sprintf("%d subscriptions", o.subs)
	}
	return fmt.Sprintf("%d subscriptions, users %v", o.subs, o.users)
}

// checkOccupancy asks n about channel through every REST call that tells: the channel
// (occupied, subscription_count, user_count), the channel list (filtered by the channel's
// own prefix, presence- or its first letter) and, for a presence channel, its users; it
// returns an error unless every answer agrees with want.
func (n *node) checkOccupancy(app *herald.App, channel string, want occupancy) error {
	presence := herald.Classify(channel).Kind == herald.Presence
	info := "subscription_count"
	prefix := channel[:1]
	if presence {
		info, prefix = "subscription_count,user_count", "presence-"
	}
	var one struct {
		Occupied          bool `json:"occupied"`
		SubscriptionCount int  `json:"subscription_count"`
		UserCount         int  `json:"user_count"`
	}
	if err := n.restJSON(app, "GET", "/apps/"+app.ID+"/channels/"+channel, url.Values{"info": {info}}, nil, &one); err != nil {
		return err
	}
	var list struct {
		Channels map[string]map[string]int `json:"channels"`
	}
	if err := n.restJSON(app, "GET", "/apps/"+app.ID+"/channels", url.Values{"filter_by_prefix": {prefix}, "info": {info}}, nil, &list); err != nil {
		return err
	}
	got := occupancy{subs: one.SubscriptionCount}
	if presence {
		var users struct {
			Users []struct {
				ID string `json:"id"`
			} `json:"users"`
		}
		if err := n.restJSON(app, "GET", "/apps/"+app.ID+"/channels/"+channel+"/users", nil, nil, &users); err != nil {
			return err
		}
		got.users = []string{}
		for _, u := range users.Users {
			got.users = append(got.users, u.ID)
		}
		sort.Strings(got.users)
	}
	listed, inList := list.Channels[channel]
	var problems []string
	if one.Occupied != (want.subs > 0) {
		problems = append(problems, fmt.Sprintf("occupied %v", one.Occupied))
	}
	if got.subs != want.subs || presence && !slices.Equal(got.users, want.users) {
		problems = append(problems, "channel and users say "+got.String())
	}
	if presence && one.UserCount != len(want.users) {
		problems = append(problems, fmt.Sprintf("user_count %d", one.UserCount))
	}
	switch {
	case want.subs == 0 && inList:
		problems = append(problems, fmt.Sprintf("listed in /channels as %v", listed))
	case want.subs > 0 && !inList:
		problems = append(problems, "not listed in /channels")
	case want.subs > 0 && (listed["subscription_count"] != want.subs || presence && listed["user_count"] != len(want.users)):
		problems = append(problems, fmt.Sprintf("/channels lists %v", listed))
	}
	if problems != nil {
		return fmt.Errorf("%s: %s: %s; want %v", n.name, channel, strings.Join(problems, ", "), want)
	}
	return nil
}

// waitOccupancy polls every node until all of them agree with want about channel, and
// returns how long that took.
func waitOccupancy(t *testing.T, nodes []*node, app *herald.App, channel string, want occupancy) time.Duration {
	t.Helper()
	start := time.Now()
	poll.NoError(t, clusterWait, fmt.Sprintf("every node to see %s with %v", channel, want), func() error {
		var errs []error
		for _, n := range nodes {
			errs = append(errs, n.checkOccupancy(app, channel, want))
		}
		return errors.Join(errs...)
	})
	return time.Since(start)
}

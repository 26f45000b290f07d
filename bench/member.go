package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/ws"
)

// members is presence's view of its channels: client i is user "u<i>", a member of channel
// i / perChannel, and each client's view records which members of its channel it has seen,
// from its subscription_succeeded snapshot or a pusher_internal:member_added. It is safe for
// concurrent use.
type members struct {
	names      []string // the channels
	perChannel int
	key        string // the app's key and secret sign each join
	secret     string
	views      []view // by client
	leaving    atomic.Bool

	mu        sync.Mutex
	latency   histogram // subscribe sent → subscription_succeeded
	lastJoin  time.Time
	snapshots Snapshots
}

// view is one client's view of its channel's members.
type view struct {
	mu         sync.Mutex
	seen       []uint64 // bit j: member j of the channel (user perChannel×channel + j) seen
	distinct   int      // bits set
	dup        int      // sightings of a member already seen
	unexpected int      // sightings of a user not of the channel
	removed    int      // member_removed before the generator closed anyone
}

// Snapshots checks every subscription_succeeded: its member count, ids and hash agree, it
// lists the member itself and no more members than a channel holds.
type Snapshots struct {
	Received     int    `json:"received"`
	MinMembers   int    `json:"min_members"`
	MaxMembers   int    `json:"max_members"`
	Inconsistent int    `json:"inconsistent"`
	FirstProblem string `json:"first_problem,omitempty"`
}

func newMembers(clients, perChannel int, key, secret string) *members {
	m := &members{perChannel: perChannel, key: key, secret: secret, views: make([]view, clients), latency: newHistogram()}
	for k := range (clients + perChannel - 1) / perChannel {
		m.names = append(m.names, "presence-bench-"+strconv.Itoa(k))
	}
	words := (perChannel + 63) / 64
	for i := range m.views {
		m.views[i].seen = make([]uint64, words)
	}
	m.snapshots.MinMembers = -1
	return m
}

// channelOf returns the channel of client (user) i.
func (m *members) channelOf(i int) int { return i / m.perChannel }

// size returns how many clients channel k has.
func (m *members) size(k int) int { return min(len(m.views)-k*m.perChannel, m.perChannel) }

// channelData is the presence data user i joins with.
func channelData(i int) string {
	return `{"user_id":"u` + strconv.Itoa(i) + `","user_info":{"name":"bench member ` + strconv.Itoa(i) + `"}}`
}

// join is presence's setup of client c: connection_established, a subscribe to its channel
// signed with the socket id, and the subscription_succeeded whose snapshot starts its view.
func (m *members) join(c *client, nc net.Conn, ep endpoint) ([]byte, error) {
	i := int(c.index)
	return converse(nc, ep, func(r *ws.MessageReader) error {
		_, data, err := c.await(nc, r, "pusher:connection_established")
		if err != nil {
			return err
		}
		var est struct {
			SocketID string `json:"socket_id"`
		}
		if err := json.Unmarshal(innerJSON(data), &est); err != nil || est.SocketID == "" {
			return fmt.Errorf("connection_established without a socket_id: %.200s", data)
		}
		channel, cd := m.names[m.channelOf(i)], channelData(i)
		auth := m.key + ":" + pusher.Sign(m.secret, est.SocketID+":"+channel+":"+cd)
		msg, _ := json.Marshal(map[string]any{"event": "pusher:subscribe", "data": map[string]string{"channel": channel, "auth": auth, "channel_data": cd}})
		sent := time.Now()
		if _, err := nc.Write(ws.AppendClientFrame(nil, ws.OpText, msg)); err != nil {
			return fmt.Errorf("subscribe: %w", err)
		}
		name, data, err := c.await(nc, r, "pusher_internal:subscription_succeeded")
		if err != nil {
			return err
		}
		now := time.Now()
		if name != channel {
			return fmt.Errorf("server confirmed a subscription to %q; asked for %q", name, channel)
		}
		m.snapshot(i, data, now.Sub(sent), now)
		return nil
	})
}

// innerJSON returns the JSON a Pusher data string holds, or data itself when it is not a string.
func innerJSON(data json.RawMessage) []byte {
	var s string
	if json.Unmarshal(data, &s) == nil {
		return []byte(s)
	}
	return data
}

// snapshot records client i's subscription_succeeded, received at now, latency after its
// subscribe: each member it lists is seen once.
func (m *members) snapshot(i int, data json.RawMessage, latency time.Duration, now time.Time) {
	var d struct {
		Presence struct {
			IDs   []string                   `json:"ids"`
			Hash  map[string]json.RawMessage `json:"hash"`
			Count int                        `json:"count"`
		} `json:"presence"`
	}
	err := json.Unmarshal(innerJSON(data), &d)
	p := d.Presence
	var problem string
	switch self := "u" + strconv.Itoa(i); {
	case err != nil:
		problem = fmt.Sprintf("unreadable presence data %.200s", data)
	case p.Count != len(p.IDs) || len(p.Hash) != len(p.IDs):
		problem = fmt.Sprintf("count %d, %d ids, %d in hash", p.Count, len(p.IDs), len(p.Hash))
	case !strings.Contains(","+strings.Join(p.IDs, ",")+",", ","+self+","):
		problem = fmt.Sprintf("%d members without the member itself (%s)", len(p.IDs), self)
	case p.Count > m.perChannel:
		problem = fmt.Sprintf("count %d in a channel of %d", p.Count, m.perChannel)
	}
	v := &m.views[i]
	v.mu.Lock()
	for _, id := range p.IDs {
		m.sawLocked(v, i, id)
	}
	v.mu.Unlock()

	m.mu.Lock()
	defer m.mu.Unlock()
	m.latency.record(latency.Nanoseconds())
	if now.After(m.lastJoin) {
		m.lastJoin = now
	}
	s := &m.snapshots
	s.Received++
	if s.MinMembers < 0 || p.Count < s.MinMembers {
		s.MinMembers = p.Count
	}
	s.MaxMembers = max(s.MaxMembers, p.Count)
	if problem != "" {
		s.Inconsistent++
		if s.FirstProblem == "" {
			s.FirstProblem = fmt.Sprintf("client %d on %s: %s", i, m.names[m.channelOf(i)], problem)
		}
	}
}

// sawLocked records that client i saw user id; v is its view, locked.
func (m *members) sawLocked(v *view, i int, id string) {
	n, err := strconv.Atoi(strings.TrimPrefix(id, "u"))
	if err != nil || !strings.HasPrefix(id, "u") || n < 0 || n >= len(m.views) || m.channelOf(n) != m.channelOf(i) {
		v.unexpected++
		return
	}
	j := n - m.channelOf(i)*m.perChannel
	w, bit := j>>6, uint64(1)<<(j&63)
	if v.seen[w]&bit != 0 {
		v.dup++
		return
	}
	v.seen[w] |= bit
	v.distinct++
}

var (
	memberAddedKey   = []byte(`"pusher_internal:member_added"`)
	memberRemovedKey = []byte(`"pusher_internal:member_removed"`)
	escUserKey       = []byte(`\"user_id\":\"u`)
)

// observe handles a message client c received besides its bench events and pings: a
// member_added adds to its view; a member_removed before the generator closed anyone is
// counted.
func (m *members) observe(c *client, p []byte) {
	added := bytes.Contains(p, memberAddedKey)
	if !added && !bytes.Contains(p, memberRemovedKey) {
		return
	}
	id, ok := memberID(p)
	if !ok {
		id = "?" // counted as unexpected
	}
	v := &m.views[c.index]
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case added:
		m.sawLocked(v, int(c.index), id)
	case !m.leaving.Load():
		v.removed++
	}
}

// memberID returns the user id of a member event: fast from herald's form (`\"user_id\":\"u7\"`
// inside the data string), else by decoding it.
func memberID(p []byte) (string, bool) {
	if n, ok := intAfter(p, escUserKey); ok {
		end := bytes.Index(p, escUserKey) + len(escUserKey) + len(strconv.FormatInt(n, 10))
		if bytes.HasPrefix(p[end:], []byte(`\"`)) {
			return "u" + strconv.FormatInt(n, 10), true
		}
	}
	var msg struct {
		Data json.RawMessage `json:"data"`
	}
	var d struct {
		UserID string `json:"user_id"`
	}
	if json.Unmarshal(p, &msg) != nil || json.Unmarshal(innerJSON(msg.Data), &d) != nil || d.UserID == "" {
		return "", false
	}
	return d.UserID, true
}

// Members counts what the members saw of each other: every member of a channel should see
// every other member that joined exactly once, from its snapshot or a member_added.
type Members struct {
	Expected   int64 `json:"expected"`   // (member, other member of its channel) pairs
	Seen       int64 `json:"seen"`       // of them, seen
	Missing    int64 `json:"missing"`    // of them, never seen
	Duplicated int64 `json:"duplicated"` // sightings of a member already seen, itself included
	Unexpected int64 `json:"unexpected"` // sightings of a user not in the channel, or whose join failed
	// Removed counts member_removed received before the generator closed anyone.
	Removed int64 `json:"removed"`
	// Complete says whether every member had seen every other within the wait; Seconds is how
	// long after the last join that took, or how long it waited.
	Complete bool    `json:"complete"`
	Seconds  float64 `json:"seconds"`
}

// Clean reports whether nothing was missing, duplicated, unexpected or removed.
func (d Members) Clean() bool {
	return d.Missing == 0 && d.Duplicated == 0 && d.Unexpected == 0 && d.Removed == 0
}

// converged reports whether every client in joined has seen as many members of its channel
// as joined holds there, itself included.
func (m *members) converged(joined []bool, counts []int) bool {
	for i := range m.views {
		if !joined[i] {
			continue
		}
		v := &m.views[i]
		v.mu.Lock()
		n := v.distinct
		v.mu.Unlock()
		if n < counts[m.channelOf(i)] {
			return false
		}
	}
	return true
}

// count tallies every joined client's view against joined, the clients whose join succeeded.
func (m *members) count(joined []bool) Members {
	var d Members
	for i := range m.views {
		if !joined[i] {
			continue
		}
		v := &m.views[i]
		v.mu.Lock()
		d.Duplicated += int64(v.dup)
		d.Unexpected += int64(v.unexpected)
		d.Removed += int64(v.removed)
		base := m.channelOf(i) * m.perChannel
		for j := range m.size(m.channelOf(i)) {
			seen := v.seen[j>>6]&(1<<(j&63)) != 0
			switch {
			case base+j == i:
			case joined[base+j] && seen:
				d.Expected++
				d.Seen++
			case joined[base+j]:
				d.Expected++
				d.Missing++
			case seen:
				d.Unexpected++
			}
		}
		v.mu.Unlock()
	}
	return d
}

// joinedCounts returns, for the clients in joined, how many joined each channel.
func (m *members) joinedCounts(joined []bool) []int {
	counts := make([]int, len(m.names))
	for i, ok := range joined {
		if ok {
			counts[m.channelOf(i)]++
		}
	}
	return counts
}

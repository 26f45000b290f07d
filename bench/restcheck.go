package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"time"
)

// restPoll is how often a RESTCheck asks again.
const restPoll = 50 * time.Millisecond

// RESTCheck is a condition on every node's answer to one REST request, asked again until it
// holds on all of them or its time is up.
type RESTCheck struct {
	Request string   `json:"request"` // the path and query asked, without the signature
	Nodes   []string `json:"nodes"`   // the base URL of each node asked
	OK      bool     `json:"ok"`
	Seconds float64  `json:"seconds"` // until it held, or how long it was asked
	// Last says what the last answer had wrong, when the check did not hold.
	Last string `json:"last,omitempty"`
}

// channelInfo is one channel of a /channels answer.
type channelInfo struct {
	UserCount         *int `json:"user_count"`
	SubscriptionCount *int `json:"subscription_count"`
}

// channelList asks one node's GET /apps/{id}/channels with query q.
func channelList(ctx context.Context, pub *publisher, t Target, base string, q url.Values) (map[string]channelInfo, int, time.Duration, error) {
	at := t
	at.REST = base
	full, path, err := at.restURL("/channels")
	if err != nil {
		return nil, 0, 0, err
	}
	body, took, err := pub.get(ctx, full, path, q)
	if err != nil {
		return nil, 0, took, err
	}
	var list struct {
		Channels map[string]channelInfo `json:"channels"`
	}
	if err := json.Unmarshal(body, &list); err != nil || list.Channels == nil {
		return nil, len(body), took, fmt.Errorf("GET %s: not a channel list: %.200q", path, body)
	}
	return list.Channels, len(body), took, nil
}

// pollChannels asks every node in nodes for its channel list with query q every restPoll, up
// to d, until wrong returns "" for each node's list; wrong says what is wrong with a list.
func pollChannels(ctx context.Context, pub *publisher, t Target, nodes []string, q url.Values, d time.Duration,
	wrong func(list map[string]channelInfo) string) RESTCheck {
	c := RESTCheck{Request: "/apps/" + t.AppID + "/channels", Nodes: nodes}
	if len(q) > 0 {
		c.Request += "?" + q.Encode()
	}
	start := time.Now()
	for {
		c.Last = ""
		for _, base := range nodes {
			list, _, _, err := channelList(ctx, pub, t, base, q)
			if err == nil {
				if w := wrong(list); w != "" {
					err = fmt.Errorf("%s", w)
				}
			}
			if err != nil {
				c.Last = base + ": " + err.Error()
				break
			}
		}
		c.Seconds = time.Since(start).Seconds()
		if c.OK = c.Last == ""; c.OK || time.Since(start) >= d || sleepUntil(ctx, time.Now().Add(restPoll)) != nil {
			return c
		}
	}
}

// writeRESTCheck writes a check's outcome under name.
func writeRESTCheck(b io.Writer, name, holds string, c *RESTCheck) {
	if c == nil {
		return
	}
	on := "on " + c.Nodes[0]
	if len(c.Nodes) > 1 {
		on = fmt.Sprintf("on each of %d nodes", len(c.Nodes))
	}
	if c.OK {
		fmt.Fprintf(b, "  %-12s %s %s: %s after %.2f s\n", name, c.Request, on, holds, c.Seconds)
		return
	}
	fmt.Fprintf(b, "  %-12s %s %s: NOT %s after %.2f s; last: %s\n", name, c.Request, on, holds, c.Seconds, c.Last)
}

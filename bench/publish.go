package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/pusher"
)

// benchEventName is the name of every event the generator publishes.
const benchEventName = "bench"

// publisher triggers events through a server's signed REST API over one keep-alive client.
type publisher struct {
	http    *http.Client
	url     string // POST target
	path    string // the path the request is signed with
	app     *herald.App
	channel string
	payload int // bytes of each event's data
}

func newPublisher(t Target, channel string, payload int) (*publisher, error) {
	full, path, err := t.eventsURL()
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute, ResponseHeaderTimeout: t.Timeout}
	return &publisher{
		http:    &http.Client{Transport: tr, Timeout: t.Timeout},
		url:     full,
		path:    path,
		app:     &herald.App{ID: t.AppID, Key: t.Key, Secret: t.Secret},
		channel: channel,
		payload: payload,
	}, nil
}

// eventData is the data of event seq sent at sent (unix nanoseconds), padded with 'x' to size
// bytes when it is shorter.
func eventData(seq int, sent int64, size int) string {
	var b strings.Builder
	b.Grow(max(size, 64))
	b.WriteString(`{"seq":`)
	b.WriteString(strconv.Itoa(seq))
	b.WriteString(`,"t":`)
	b.WriteString(strconv.FormatInt(sent, 10))
	b.WriteString(`,"pad":"`)
	pad := size - b.Len() - len(`"}`)
	b.WriteString(strings.Repeat("x", max(pad, 0)))
	b.WriteString(`"}`)
	return b.String()
}

// publish triggers event seq and returns how long the request took.
func (p *publisher) publish(ctx context.Context, seq int) (time.Duration, error) {
	start := time.Now()
	body, _ := json.Marshal(struct {
		Name    string `json:"name"`
		Channel string `json:"channel"`
		Data    string `json:"data"`
	}{benchEventName, p.channel, eventData(seq, start.UnixNano(), p.payload)})
	q := pusher.SignRequest(p.app, http.MethodPost, p.path, nil, body, start)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url+"?"+q.Encode(), bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("publish event %d: %w", seq, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("publish event %d: %w", seq, err)
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("publish event %d: POST %s: %s: %.300s", seq, p.path, resp.Status, bytes.TrimSpace(reply))
	}
	return time.Since(start), nil
}

func (p *publisher) close() { p.http.CloseIdleConnections() }

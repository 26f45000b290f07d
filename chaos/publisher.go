//go:build linux

package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/pusher"
)

// The publishers' retries: the wait before retry n is retryFirst × 2ⁿ, at most retryMost,
// jittered down by up to half.
const (
	retryFirst = 100 * time.Millisecond
	retryMost  = 2 * time.Second
)

// publisher publishes numbered events over REST, each with its idempotency key, one at a
// time and in order, and retries each on the next node (round robin) until it is answered
// 200, as a careful publisher does. Its events go to its channels in turn.
type publisher struct {
	id       string
	channels []string
	nodes    []*node
	app      *herald.App
	rate     float64
	timeout  time.Duration
	start    time.Time
	rng      *rand.Rand
	client   *http.Client

	mu       sync.Mutex
	events   []Published
	failures map[string]int // why attempts failed
	next     int            // the node of the next attempt
	seq      int            // the number of the last event
}

func newPublisher(id string, channels []string, nodes []*node, app *herald.App, o Options, start time.Time, seed uint64, n int) *publisher {
	return &publisher{id: id, channels: channels, nodes: nodes, app: app, rate: o.Rate, timeout: o.PublishTimeout,
		start: start, rng: rand.New(rand.NewPCG(seed, uint64(n)+2<<32)), failures: map[string]int{}, next: n,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2, IdleConnTimeout: 10 * time.Second}}}
}

// run publishes until publishing ends; each event is retried until it is acknowledged or
// hard ends.
func (p *publisher) run(publishing, hard context.Context) {
	every := time.Duration(float64(time.Second) / p.rate)
	at := time.Now()
	for publishing.Err() == nil {
		p.seq++
		p.publish(hard, p.seq, p.channels[(p.seq-1)%len(p.channels)])
		at = at.Add(every)
		if now := time.Now(); at.Before(now) {
			at = now // behind after a long retry: no burst to catch up
		}
		sleep(publishing, time.Until(at))
	}
}

// finish publishes one more event on each channel: the run sends them once the faults have
// ended and every subscriber is back, so each channel ends with events every subscriber
// must receive live.
func (p *publisher) finish(hard context.Context) {
	for _, ch := range p.channels {
		if hard.Err() != nil {
			return
		}
		p.seq++
		p.publish(hard, p.seq, ch)
	}
}

// publish sends event seq to channel until it is answered 200 or ctx ends, and records it.
func (p *publisher) publish(ctx context.Context, seq int, channel string) {
	ev := Published{Publisher: p.id, Seq: seq, Channel: channel, First: time.Since(p.start)}
	body, _ := json.Marshal(map[string]string{"name": "chaos", "channel": channel,
		"data": payload{P: p.id, S: seq}.encode()})
	for retry := 0; ctx.Err() == nil; retry++ {
		n := p.nodes[p.next%len(p.nodes)]
		p.next++
		ev.Attempts++
		status, err := p.post(ctx, n, body, ev.Key())
		if status == http.StatusOK {
			ev.Acked = true
			break
		}
		p.failed(cause(status, err))
		wait := min(retryMost, retryFirst<<min(retry, 10))
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(float64(wait) * (0.5 + p.rng.Float64()/2))):
		}
	}
	ev.Done = time.Since(p.start)
	p.mu.Lock()
	p.events = append(p.events, ev)
	p.mu.Unlock()
}

// post sends one signed /events request to n with the key; err is no answer within the
// timeout (or ctx's end).
func (p *publisher) post(ctx context.Context, n *node, body []byte, key string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	path := "/apps/" + p.app.ID + "/events"
	q := pusher.SignRequest(p.app, "POST", path, nil, body, time.Now())
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+n.addr+path+"?"+q.Encode(), bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Idempotency-Key", key)
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}

func (p *publisher) failed(why string) {
	p.mu.Lock()
	p.failures[why]++
	p.mu.Unlock()
}

// cause names why an attempt failed, for the report.
func cause(status int, err error) string {
	switch {
	case err == nil:
		return "status " + strconv.Itoa(status)
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled at the end"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "unreachable"
	}
	return "other error"
}

// record returns the events published so far, and why attempts failed.
func (p *publisher) record() ([]Published, map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := make(map[string]int, len(p.failures))
	for k, v := range p.failures {
		f[k] = v
	}
	return append([]Published(nil), p.events...), f
}

// last is the number of the last event acknowledged on channel, 0 if none.
func (p *publisher) last(channel string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.events) - 1; i >= 0; i-- {
		if e := p.events[i]; e.Channel == channel && e.Acked {
			return e.Seq
		}
	}
	return 0
}

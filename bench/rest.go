package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/pusher"
)

// benchEventName is the name of every event the generator publishes.
const benchEventName = "bench"

// maxChannelsPerTrigger is how many channels one trigger request names (Pusher's limit).
const maxChannelsPerTrigger = 100

// publisher triggers events through a server's signed REST API over keep-alive connections,
// and reads it (get). It is safe for concurrent use.
type publisher struct {
	http                *http.Client
	events, eventsPath  string // POST targets and the paths they are signed with
	batches, batchPaths string
	app                 *herald.App
	payload             int     // bytes of each event's data
	log                 logSink // with --publish: events go there, not to the REST API
}

// newPublisher returns a publisher that keeps up to conns connections alive.
func newPublisher(t Target, payload, conns int) (*publisher, error) {
	events, eventsPath, err := t.restURL("/events")
	if err != nil {
		return nil, err
	}
	batches, batchPath, _ := t.restURL("/batch_events")
	tr := &http.Transport{MaxIdleConnsPerHost: max(conns, 2), IdleConnTimeout: time.Minute, ResponseHeaderTimeout: t.Timeout}
	if roots, err := t.roots(); err != nil {
		return nil, err
	} else if roots != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	var log logSink
	if t.Publish != "" {
		if log, err = newLogSink(t.Publish); err != nil {
			return nil, err
		}
	}
	return &publisher{log: log,
		http:   &http.Client{Transport: tr, Timeout: t.Timeout},
		events: events, eventsPath: eventsPath, batches: batches, batchPaths: batchPath,
		app:     &herald.App{ID: t.AppID, Key: t.Key, Secret: t.Secret},
		payload: payload,
	}, nil
}

// eventData is the data of event seq sent at sent and scheduled for sched (unix nanoseconds;
// 0: sent), padded with 'x' to size bytes when it is shorter. Subscribers measure latency
// from both: sent hides a server that is slow to answer the publisher (each stamp waits for
// the previous request), sched does not.
func eventData(seq int, sent, sched int64, size int) string {
	if sched == 0 {
		sched = sent
	}
	var b strings.Builder
	b.Grow(max(size, 80))
	b.WriteString(`{"seq":`)
	b.WriteString(strconv.Itoa(seq))
	b.WriteString(`,"t":`)
	b.WriteString(strconv.FormatInt(sent, 10))
	b.WriteString(`,"s":`)
	b.WriteString(strconv.FormatInt(sched, 10))
	b.WriteString(`,"pad":"`)
	pad := size - b.Len() - len(`"}`)
	b.WriteString(strings.Repeat("x", max(pad, 0)))
	b.WriteString(`"}`)
	return b.String()
}

type restEvent struct {
	Name     string   `json:"name"`
	Channel  string   `json:"channel,omitempty"`
	Channels []string `json:"channels,omitempty"`
	Data     string   `json:"data"`
}

// trigger publishes event seq to channels in one request and returns how long it took.
func (p *publisher) trigger(ctx context.Context, channels []string, seq int) (time.Duration, error) {
	return p.triggerAt(ctx, channels, seq, time.Time{})
}

// triggerAt is trigger for an event the schedule meant to send at sched (zero: now).
func (p *publisher) triggerAt(ctx context.Context, channels []string, seq int, sched time.Time) (time.Duration, error) {
	start := time.Now()
	ev := restEvent{Name: benchEventName, Data: eventData(seq, start.UnixNano(), unixNano(sched), p.payload)}
	if len(channels) == 1 {
		ev.Channel = channels[0]
	} else {
		ev.Channels = channels
	}
	if p.log != nil { // one record per channel, as a producer of one topic per channel would
		bodies := make([][]byte, len(channels))
		for i, ch := range channels {
			bodies[i], _ = json.Marshal(restEvent{Name: ev.Name, Channel: ch, Data: ev.Data})
		}
		if err := p.log.send(ctx, bodies); err != nil {
			return 0, fmt.Errorf("produce event %d: %w", seq, err)
		}
		return time.Since(start), nil
	}
	body, _ := json.Marshal(ev)
	if err := p.post(ctx, p.events, p.eventsPath, body, start); err != nil {
		return 0, fmt.Errorf("publish event %d: %w", seq, err)
	}
	return time.Since(start), nil
}

// item is one event of a batch: seq on channel.
type item struct {
	channel string
	seq     int
}

// batch publishes items in one batch_events request and returns how long it took.
func (p *publisher) batch(ctx context.Context, items []item) (time.Duration, error) {
	return p.batchAt(ctx, items, time.Time{})
}

// batchAt is batch with each event's scheduled time (the zero time: none).
func (p *publisher) batchAt(ctx context.Context, items []item, sched time.Time) (time.Duration, error) {
	start := time.Now()
	evs := make([]restEvent, len(items))
	for i, it := range items {
		evs[i] = restEvent{Name: benchEventName, Channel: it.channel, Data: eventData(it.seq, start.UnixNano(), unixNano(sched), p.payload)}
	}
	if p.log != nil {
		bodies := make([][]byte, len(evs))
		for i := range evs {
			bodies[i], _ = json.Marshal(evs[i])
		}
		if err := p.log.send(ctx, bodies); err != nil {
			return 0, fmt.Errorf("produce a batch of %d: %w", len(items), err)
		}
		return time.Since(start), nil
	}
	body, _ := json.Marshal(map[string]any{"batch": evs})
	if err := p.post(ctx, p.batches, p.batchPaths, body, start); err != nil {
		return 0, fmt.Errorf("publish a batch of %d: %w", len(items), err)
	}
	return time.Since(start), nil
}

// unixNano is t in unix nanoseconds, or 0 for the zero time.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func (p *publisher) post(ctx context.Context, url, path string, body []byte, now time.Time) error {
	q := pusher.SignRequest(p.app, http.MethodPost, path, nil, body, now)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"?"+q.Encode(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s: %.300s", path, resp.Status, bytes.TrimSpace(reply))
	}
	return nil
}

// maxGetReply bounds the body of a REST answer that get reads: /channels with 100,000
// channels and their counts is about 5 MiB.
const maxGetReply = 64 << 20

// get makes a signed GET of full (the path it is signed with is path) with the query extra,
// and returns the body of a 200 answer and how long the request took, the body read.
func (p *publisher) get(ctx context.Context, full, path string, extra url.Values) ([]byte, time.Duration, error) {
	start := time.Now()
	q := pusher.SignRequest(p.app, http.MethodGet, path, extra, nil, start)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, full+"?"+q.Encode(), nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxGetReply))
	took := time.Since(start)
	if err != nil {
		return nil, took, fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, took, fmt.Errorf("GET %s: %s: %.300s", path, resp.Status, bytes.TrimSpace(body))
	}
	return body, took, nil
}

func (p *publisher) close() {
	p.http.CloseIdleConnections()
	if p.log != nil {
		p.log.close()
	}
}

// sequence numbers each channel's events 1, 2, ... and remembers the publishes that failed.
// It is safe for concurrent use.
type sequence struct {
	started []atomic.Int32 // per channel: the last seq handed out
	mu      sync.Mutex
	failed  map[int][]int32
	nFailed int
}

func newSequence(channels int) *sequence {
	return &sequence{started: make([]atomic.Int32, channels), failed: map[int][]int32{}}
}

// next hands out channel ch's next seq; call it before the publish starts.
func (s *sequence) next(ch int) int { return int(s.started[ch].Add(1)) }

// last returns the last seq handed out on ch.
func (s *sequence) last(ch int) int32 { return s.started[ch].Load() }

// fail records that seq's publish on ch failed: it may or may not have been delivered.
func (s *sequence) fail(ch int, seq int) {
	s.mu.Lock()
	s.failed[ch] = append(s.failed[ch], int32(seq))
	s.nFailed++
	s.mu.Unlock()
}

// failedOn returns the failed seqs of ch; call it once publishing has stopped.
func (s *sequence) failedOn(ch int) []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed[ch]
}

// triggerChunks publishes seq, scheduled for sched, to every channel, maxChannelsPerTrigger at
// a time, and returns the time of the slowest request.
func (p *publisher) triggerChunks(ctx context.Context, channels []string, seq int, sched time.Time) (time.Duration, error) {
	var slowest time.Duration
	for i := 0; i < len(channels); i += maxChannelsPerTrigger {
		took, err := p.triggerAt(ctx, channels[i:min(i+maxChannelsPerTrigger, len(channels))], seq, sched)
		if err != nil {
			return 0, err
		}
		slowest = max(slowest, took)
	}
	return slowest, nil
}

// publishEvery publishes the next seq to every channel (one request) at once and then each
// interval until stop is closed, letting a request in flight finish; it returns nil then.
// Event k is scheduled for start + k × every: a request that takes longer than every delays
// the next, and the subscribers' latency from the schedule shows it.
// Failures are recorded in seq; a first publish that fails ends the run, as nothing would be
// delivered.
func publishEvery(ctx context.Context, stop <-chan struct{}, pub *publisher, channels []string, seq *sequence, every time.Duration) error {
	start := time.Now()
	for k := 0; ; k++ {
		if k > 0 { // the first publish is not raced against stop: every run publishes once
			t := time.NewTimer(time.Until(start.Add(time.Duration(k) * every)))
			select {
			case <-t.C:
			case <-stop:
				t.Stop()
				return nil
			case <-ctx.Done():
				t.Stop()
				return context.Cause(ctx)
			}
		}
		n := 0
		for ch := range channels {
			n = seq.next(ch)
		}
		if _, err := pub.triggerAt(ctx, channels, n, start.Add(time.Duration(k)*every)); err != nil {
			if n == 1 || ctx.Err() != nil {
				return err
			}
			for ch := range channels {
				seq.fail(ch, n)
			}
		}
	}
}

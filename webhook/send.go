package webhook

import (
	"bytes"
	"io"
	"net/http"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/backoff"
)

// run sends the webhook's batches, one at a time, until the Sender stops (or the webhook is
// retired) and nothing is left.
func (t *target) run() {
	defer t.s.wg.Done()
	defer t.s.finished(t)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		stopping := t.ending()
		now := time.Now()
		t.recheck(now, stopping)
		t.mu.Lock()
		t.promote(now, stopping, false)
		n, next := t.ready(), t.nextDue()
		t.mu.Unlock()
		if n == 0 {
			if stopping {
				return // every leave was promoted: nothing is left
			}
			wait := time.Hour
			if !next.IsZero() {
				wait = max(time.Until(next), time.Millisecond)
			}
			timer.Reset(wait)
			select {
			case <-t.wake:
			case <-timer.C:
			case <-t.s.stop:
			case <-t.retire:
			}
			timer.Stop()
			continue
		}
		if !stopping { // let the batch gather
			timer.Reset(t.opts.BatchInterval)
			select {
			case <-timer.C:
			case <-t.s.stop:
			case <-t.retire:
			}
			timer.Stop()
		}
		now, stopping = time.Now(), t.ending()
		t.recheck(now, stopping)
		t.mu.Lock()
		t.promote(now, stopping, true)
		batch := t.take(t.opts.MaxBatch)
		t.mu.Unlock()
		if len(batch) > 0 {
			t.after()
			t.deliver(batch)
		}
	}
}

// after waits until the webhook this one replaced (same URL) has sent what it held, so that
// the URL gets its events in order.
func (t *target) after() {
	if t.prev == nil {
		return
	}
	select {
	case <-t.prev:
	case <-t.s.ctx.Done():
	}
	t.prev = nil
}

// deliver posts one batch until it is answered 2xx, refused for good (4xx), or its retry time
// runs out; between attempts it waits an exponential backoff with jitter.
func (t *target) deliver(evs []event) {
	start := time.Now()
	b := body(start, evs)
	cred := t.app.cred.Load() // the key and secret now: a batch is signed as the app is when it is sent
	sig := Sign(cred.Secret, b)
	for attempt := 0; ; attempt++ {
		code, err := t.post(b, cred.Key, sig)
		if err == nil && code >= 200 && code < 300 {
			t.sent.Add(uint64(len(evs)))
			t.report(evs, code)
			return
		}
		t.failed.Add(1)
		if err == nil && !retryable(code) {
			t.dropped("rejected", len(evs))
			t.warn("webhook refused: its events are dropped", code, err, attempt)
			t.report(evs, code)
			return
		}
		wait := t.opts.retry().Wait(attempt)
		if time.Since(start)+wait > t.opts.RetryFor {
			t.dropped("expired", len(evs))
			t.warn("webhook retries ran out: its events are dropped", code, err, attempt)
			return
		}
		t.warn("webhook failed: retrying", code, err, attempt)
		select {
		case <-time.After(wait):
		case <-t.s.ctx.Done():
			t.dropped("expired", len(evs))
			return
		}
		t.retried.Add(1)
	}
}

// retryable: the endpoint may answer better later.
func retryable(code int) bool {
	return code >= 500 || code == http.StatusTooManyRequests || code == http.StatusRequestTimeout
}

// retry is the backoff between attempts: the wait before retry n+1 is RetryMinBackoff × 2ⁿ
// up to RetryMaxBackoff, then a random part of its second half off (so that many nodes'
// retries spread).
func (o Options) retry() backoff.Policy {
	return backoff.Policy{First: o.RetryMinBackoff, Most: o.RetryMaxBackoff, Jitter: backoff.Jitter{Below: 0.5}}
}

// post sends one request and returns the answer's status.
func (t *target) post(body []byte, key, sig string) (int, error) {
	req, err := http.NewRequestWithContext(t.s.ctx, http.MethodPost, t.hook.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	for k, v := range t.hook.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Pusher-Key", key)
	req.Header.Set("X-Pusher-Signature", sig)
	start := time.Now()
	resp, err := t.s.client.Do(req)
	if t.opts.Latency != nil {
		t.opts.Latency(t.app.app.ID, time.Since(start).Seconds())
	}
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	resp.Body.Close()
	return resp.StatusCode, nil
}

// dropped counts n events dropped for why and logs it at most every 10 s.
func (t *target) dropped(why string, n int) {
	var total uint64
	switch why {
	case "queue_full":
		total = t.droppedFull.Add(uint64(n))
	case "expired":
		total = t.droppedExpired.Add(uint64(n))
	default:
		total = t.droppedRejected.Add(uint64(n))
	}
	if why == "queue_full" && t.dropWarn.Due(time.Now().UnixMilli(), 10_000) {
		t.s.log.Warn("webhook queue full: dropping its oldest events", "app_id", t.app.app.ID, "url", Redacted(t.hook.URL),
			"queue_size", t.opts.QueueSize, "dropped_total", total)
	}
}

// warn logs a failed request, at most every 10 s per webhook.
func (t *target) warn(msg string, code int, err error, attempt int) {
	if !t.failWarn.Due(time.Now().UnixMilli(), 10_000) {
		return
	}
	args := []any{"app_id", t.app.app.ID, "url", Redacted(t.hook.URL), "attempt", attempt + 1}
	if err != nil {
		args = append(args, "err", redactErr(err, t.hook.URL))
	} else {
		args = append(args, "status", code)
	}
	t.s.log.Warn(msg, args...)
}

// report tells Options.Sent of each event of an answered request.
func (t *target) report(evs []event, code int) {
	if t.opts.Sent == nil {
		return
	}
	for _, ev := range evs {
		t.opts.Sent(t.app.app.ID, &herald.Activity{Kind: herald.WebhookSent, App: t.app.app.ID, Time: time.Now(),
			Event: ev.Name, Channel: ev.Channel, Code: code})
	}
}

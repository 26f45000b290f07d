package bench

import (
	"context"
	"errors"
	"sync"
	"time"
)

// roundTimes is one round of publishPerChannel: its scheduled start, its first request's
// start and its last request's answer over every channel (zero when none started).
type roundTimes struct {
	sched, began, ended time.Time
}

// publishPerChannel runs one publisher per channel, all at once, each in its own goroutine:
// for round r (0-based), at start + r × interval, channel c's publisher sends seqs
// r × burst + 1 to (r+1) × burst to the channel, one event a request, each request after the
// previous one's answer. A publisher whose burst outlasts the interval starts its next round
// late; the others do not wait for it. Channel c's requests go to pubs[c mod len(pubs)]. Each
// request's time is recorded in requests. The first failed request stops every publisher and
// is returned, with the rounds' times so far.
func publishPerChannel(ctx context.Context, pubs []*publisher, names []string, burst, rounds int, start time.Time,
	interval time.Duration, requests histogram) ([]roundTimes, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// began[r][c] and ended[r][c]: channel c's round r; each goroutine writes its own column.
	began, ended := make([][]time.Time, rounds), make([][]time.Time, rounds)
	for r := range rounds {
		began[r], ended[r] = make([]time.Time, len(names)), make([]time.Time, len(names))
	}
	took := newHistograms(len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for c, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pub, channel := pubs[c%len(pubs)], []string{name}
			for r := range rounds {
				sched := start.Add(time.Duration(r) * interval)
				if err := sleepUntil(ctx, sched); err != nil {
					return
				}
				began[r][c] = time.Now()
				for k := 1; k <= burst; k++ {
					d, err := pub.triggerAt(ctx, channel, r*burst+k, sched)
					if err != nil {
						if ctx.Err() == nil { // not another publisher's failure stopping this one
							errs[c] = err
							cancel(err)
						}
						return
					}
					took[c].record(d.Nanoseconds())
				}
				ended[r][c] = time.Now()
			}
		}()
	}
	wg.Wait()
	for _, h := range took {
		requests.merge(h)
	}
	times := make([]roundTimes, rounds)
	for r := range times {
		times[r].sched = start.Add(time.Duration(r) * interval)
		for c := range names {
			if b := began[r][c]; !b.IsZero() && (times[r].began.IsZero() || b.Before(times[r].began)) {
				times[r].began = b
			}
			if e := ended[r][c]; e.After(times[r].ended) {
				times[r].ended = e
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return times, err
	}
	return times, context.Cause(ctx) // the caller's cancellation, when no request failed
}

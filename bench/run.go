package bench

import (
	"context"
	"time"
)

// published is one run of a fixed set of subscribers that events are then published to: the
// shape fanout and multichannel share.
type published struct {
	Setup       Setup
	Tally       *tally
	Start       time.Time // when publishing started
	Complete    bool      // every expected delivery arrived within the wait
	WaitSeconds float64   // from the last publish to the end of delivery
	// Server and Generator are CPU time from just before the first publish to the end of
	// delivery, and RSS then. Server is nil without a server pid.
	Server    *Usage
	Generator Usage
}

// runPublished subscribes spec, calls quiet (when not nil), then publish, waits at most wait
// for every delivery and closes the subscribers. On error, what was measured so far is
// returned with it.
func runPublished(ctx context.Context, t Target, spec subSpec, wait time.Duration, quiet func(context.Context, subscribers) error, publish func(context.Context) error) (*published, error) {
	r := &published{}
	g, err := subscribe(ctx, t, spec)
	if g != nil {
		r.Setup = g.setup()
	}
	if err != nil {
		return r, err
	}
	finished := false
	defer func() {
		if !finished {
			g.abort()
		}
	}()

	if quiet != nil {
		if err := quiet(ctx, g); err != nil {
			return r, err
		}
	}
	serverCPU := t.serverProcs().startCPU()
	gen := generator(g.pids())
	genCPU := startCPU(gen)
	r.Start = time.Now()
	if err := publish(ctx); err != nil {
		return r, err
	}
	last := time.Now()
	if r.Complete, err = g.await(ctx, wait); err != nil {
		return r, err
	}
	r.WaitSeconds = time.Since(last).Seconds()
	if serverCPU != nil {
		u, err := serverCPU.stop()
		if err != nil {
			return r, err
		}
		r.Server = u
	}
	if u, err := genCPU.stop(); err == nil {
		r.Generator = u
		r.Generator.Procs = len(gen)
	}
	finished = true
	if r.Tally, err = g.finish(ctx); err != nil {
		return r, err
	}
	r.Tally.Delivery.WaitSeconds, r.Tally.Delivery.Complete = r.WaitSeconds, r.Complete
	if d := float64(r.Tally.Delivery.Delivered); d > 0 {
		if r.Server != nil {
			r.Server.CPUPerDeliveryMicros = r.Server.CPUSeconds * 1e6 / d
			if r.Server.WriteCalls > 0 {
				r.Server.DeliveriesPerWrite = d / float64(r.Server.WriteCalls)
			}
		}
		r.Generator.CPUPerDeliveryMicros = r.Generator.CPUSeconds * 1e6 / d
	}
	return r, nil
}

// sleepUntil waits until at, or returns ctx's cause.
func sleepUntil(ctx context.Context, at time.Time) error {
	d := time.Until(at)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

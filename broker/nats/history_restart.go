package nats

import (
	"context"
	"fmt"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/nats-io/nats.go/jetstream"
)

// Restart ends (app, channel)'s epoch when it is still epoch: a cluster node asks for it when
// it finds that JetStream went back within the epoch (it lost messages it had acknowledged: a
// power cut before the stream's files were synced), whose next publishes would be given
// offsets already given to the lost events. A channel's epoch is its last message's
// (History), so Restart purges the channel's messages up to its last one, as long as that
// one is of epoch (a purge up to a sequence: a message stored meanwhile is kept, and looked
// at in turn). The next publish then finds no message and starts a new epoch at offset 1;
// publishes that expected the old last message are refused and read the channel again. Nodes
// that find it out at once so agree: whoever purges, the first publish after it makes the
// one new epoch. It returns the channel's position then: the zero Position once the epoch's
// messages are gone, or the position of a message of another epoch.
func (h *History) Restart(ctx context.Context, rule herald.HistoryRule, app, channel, epoch string) (herald.Position, error) {
	const what = "nats history restart"
	if err := broker.CheckRule(rule); err != nil {
		return herald.Position{}, err
	}
	if epoch == "" {
		return herald.Position{}, herald.Errorf(herald.CodeInvalid, "%s: no epoch to end", what)
	}
	if h.b.closed.Load() || !h.b.nc.IsConnected() {
		return herald.Position{}, broker.Unavailable(what, nil)
	}
	ctx, cancel := h.deadline(ctx)
	defer cancel()
	k := streamKey{app: app, rule: rule}
	subject := h.subject(k, channel)
	for attempt := 0; attempt < maxAttempts; attempt++ {
		s, err := h.stream(ctx, k, false)
		if err != nil {
			return herald.Position{}, fmt.Errorf("%s: %w", what, err)
		}
		if s == nil {
			return herald.Position{}, nil // no stream: no history
		}
		seq, pos, err := lastOf(ctx, s, subject)
		if missing(err) {
			h.forget(k, s)
			continue
		}
		if err != nil {
			return herald.Position{}, fmt.Errorf("%s: %w", what, unavailable(err))
		}
		if seq == 0 || pos.Epoch != epoch {
			return pos, nil
		}
		_, err = retry(ctx, func(ctx context.Context) (struct{}, error) {
			return struct{}{}, s.Purge(ctx, jetstream.WithPurgeSubject(subject), jetstream.WithPurgeSequence(seq+1))
		})
		if missing(err) {
			h.forget(k, s)
			continue
		}
		if err != nil {
			return herald.Position{}, fmt.Errorf("%s: %w", what, unavailable(err))
		}
	}
	return herald.Position{}, herald.Errorf(herald.CodeBusy, "%s: channel %q: %d purges in a row found a message of epoch %s stored after", what, channel, maxAttempts, epoch)
}

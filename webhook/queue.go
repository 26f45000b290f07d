package webhook

import (
	"time"
)

// A webhook's events wait in its queue, in the order they were decided; channel_vacated and
// member_removed wait their leave delay in delayed first, and subscription counts keep only
// each channel's latest until the next batch. All of it is bounded by Options.QueueSize,
// guarded by target.mu.

// delayed is a channel_vacated or member_removed waiting for its delay to end.
type delayed struct {
	ev        event
	due       time.Time
	cancelled bool // the channel was occupied (the member added) again
}

type memberKey struct{ channel, user string }

// offer queues ev (an event of the app happening now) unless the webhook does not want it or
// it cancels a pending leave.
func (t *target) offer(ev event, now time.Time) {
	if !keeps(t.hook.Filter, ev.Channel) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.retired {
		return // the webhook was removed or changed: its successor has the event
	}
	switch ev.Name {
	case ChannelOccupied:
		if d := t.vacating[ev.Channel]; d != nil {
			t.cancel(d)
			delete(t.vacating, ev.Channel)
			return // the backend never heard of the vacancy: nothing to say
		}
	case MemberAdded:
		k := memberKey{ev.Channel, ev.UserID}
		if d := t.removing[k]; d != nil {
			t.cancel(d)
			delete(t.removing, k)
			return
		}
	case ChannelVacated, MemberRemoved:
		if t.opts.LeaveDelay > 0 {
			d := &delayed{ev: ev, due: now.Add(t.opts.LeaveDelay)}
			t.delayed = append(t.delayed, d)
			if ev.Name == ChannelVacated {
				t.vacating[ev.Channel] = d
			} else {
				t.removing[memberKey{ev.Channel, ev.UserID}] = d
			}
			t.held++
			t.bound()
			t.poke()
			return
		}
	case SubscriptionCount:
		if !t.wants(ev.Name) {
			return
		}
		if _, ok := t.counts[ev.Channel]; !ok {
			t.countOrder = append(t.countOrder, ev.Channel)
			t.held++
		}
		t.counts[ev.Channel] = *ev.SubscriptionCount
		t.bound()
		t.poke()
		return
	}
	if t.wants(ev.Name) {
		t.push(ev)
		t.poke()
	}
}

func (t *target) wants(name string) bool { return len(t.types) == 0 || t.types[name] }

// cancel drops a pending leave.
func (t *target) cancel(d *delayed) {
	if !d.cancelled {
		d.cancelled = true
		t.held--
	}
}

func (t *target) push(ev event) {
	t.queue = append(t.queue, ev)
	t.held++
	t.bound()
}

// bound drops the oldest events while more than the queue's size are held: queued ones
// first, then delayed ones, then counts.
func (t *target) bound() {
	for t.held > t.opts.QueueSize {
		switch {
		case t.head < len(t.queue):
			t.queue[t.head] = event{}
			t.head++
			t.held--
		case t.dhead < len(t.delayed):
			d := t.delayed[t.dhead]
			t.delayed[t.dhead] = nil
			t.dhead++
			if !d.cancelled {
				t.forgetLeave(d)
				t.held--
			} else {
				continue // not counted: nothing dropped
			}
		default:
			ch := t.countOrder[0]
			t.countOrder = t.countOrder[1:]
			delete(t.counts, ch)
			t.held--
		}
		t.dropped("queue_full", 1)
	}
	t.depth.Store(int64(t.held))
}

// forgetLeave removes d from the pending leaves, if it is the one there.
func (t *target) forgetLeave(d *delayed) {
	if d.ev.Name == ChannelVacated {
		if t.vacating[d.ev.Channel] == d {
			delete(t.vacating, d.ev.Channel)
		}
		return
	}
	k := memberKey{d.ev.Channel, d.ev.UserID}
	if t.removing[k] == d {
		delete(t.removing, k)
	}
}

// promote moves the leaves due at now (all of them when all) to the queue, in order, and
// when counts, the subscription counts.
func (t *target) promote(now time.Time, all, counts bool) {
	for t.dhead < len(t.delayed) {
		d := t.delayed[t.dhead]
		if !d.cancelled && !all && d.due.After(now) {
			break
		}
		t.delayed[t.dhead] = nil
		t.dhead++
		if d.cancelled {
			continue
		}
		t.forgetLeave(d)
		if t.wants(d.ev.Name) {
			t.queue = append(t.queue, d.ev) // still held
		} else {
			t.held--
		}
	}
	if t.dhead == len(t.delayed) {
		t.delayed, t.dhead = t.delayed[:0], 0
	}
	if counts {
		for _, ch := range t.countOrder {
			n := t.counts[ch]
			t.queue = append(t.queue, event{Name: SubscriptionCount, Channel: ch, SubscriptionCount: &n})
		}
		clear(t.counts)
		t.countOrder = t.countOrder[:0]
	}
	t.depth.Store(int64(t.held))
}

// nextDue is when the first pending leave is due; zero when none is.
func (t *target) nextDue() time.Time {
	for _, d := range t.delayed[t.dhead:] {
		if !d.cancelled {
			return d.due
		}
	}
	return time.Time{}
}

// ready is how many events a batch could take now.
func (t *target) ready() int { return len(t.queue) - t.head + len(t.counts) }

// take removes and returns up to n queued events.
func (t *target) take(n int) []event {
	n = min(n, len(t.queue)-t.head)
	out := make([]event, n)
	copy(out, t.queue[t.head:])
	clear(t.queue[t.head : t.head+n])
	t.head += n
	t.held -= n
	if t.head == len(t.queue) {
		t.queue, t.head = t.queue[:0], 0
	} else if t.head > 1024 && t.head > len(t.queue)/2 {
		m := copy(t.queue, t.queue[t.head:])
		clear(t.queue[m:])
		t.queue, t.head = t.queue[:m], 0
	}
	t.depth.Store(int64(t.held))
	return out
}

func (t *target) poke() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// recheck cancels the leaves due at now (all of them when all) whose channel is occupied, or
// member present, again (Options.Present). Present is asked without t.mu: the server calls
// Observe, which takes t.mu, under its own locks.
func (t *target) recheck(now time.Time, all bool) {
	if t.opts.Present == nil {
		return
	}
	var due []*delayed
	t.mu.Lock()
	for _, d := range t.delayed[t.dhead:] {
		if !all && d.due.After(now) {
			break
		}
		if !d.cancelled {
			due = append(due, d)
		}
	}
	t.mu.Unlock()
	var back []*delayed
	for _, d := range due {
		if t.opts.Present(t.app.app.ID, d.ev.Channel, d.ev.UserID) {
			back = append(back, d)
		}
	}
	if len(back) == 0 {
		return
	}
	t.mu.Lock()
	for _, d := range back {
		if !d.cancelled {
			t.cancel(d)
			t.forgetLeave(d)
		}
	}
	t.depth.Store(int64(t.held))
	t.mu.Unlock()
}

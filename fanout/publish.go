package fanout

import (
	"time"

	"github.com/herald-rt/herald"
)

// Slots is one publish's reservation in the workers' queues: how many commands it will
// send each worker and how many slots it holds there. Reset prepares it for an engine: for
// up to 16 workers it then lives where it is declared (on the publisher's stack), with no
// allocation.
type Slots struct {
	n    int
	buf  [32]int32 // want[0:16], held[16:32] for up to 16 workers
	more []int32   // want[0:n], held[n:2n] beyond
}

// Reset sizes s for e's workers, empty.
func (s *Slots) Reset(e *Engine) {
	s.n = len(e.workers)
	if s.n <= 16 {
		s.buf = [32]int32{}
		s.more = nil
	} else {
		s.more = make([]int32, 2*s.n)
	}
}

func (s *Slots) want(i int) *int32 {
	if s.more != nil {
		return &s.more[i]
	}
	return &s.buf[i]
}

func (s *Slots) held(i int) *int32 {
	if s.more != nil {
		return &s.more[s.n+i]
	}
	return &s.buf[16+i]
}

// Want counts, for each worker that has subscribers of ch now, one more command to send it.
func (s *Slots) Want(ch *Channel) {
	for i := 0; i < s.n; i++ {
		if ch.wcount[i].Load() > 0 {
			*s.want(i)++
		}
	}
}

// Reserve takes, in each worker, one slot of its queue per command s wants there (at most
// the queue's size), waiting up to the publish timeout in all for room. It takes all of
// them or, returning a CodeBusy error, none. Every publisher takes workers in index order,
// so publishers that wait for slots another holds never wait in a cycle.
func (e *Engine) Reserve(s *Slots) error {
	var t *time.Timer
	for i, w := range e.workers {
		held := s.held(i)
		for n := min(*s.want(i), int32(cap(w.slots))); *held < n; {
			select {
			case w.slots <- struct{}{}:
				*held++
				continue
			default:
			}
			if t == nil {
				t = time.NewTimer(e.cfg.PublishTimeout)
			}
			select {
			case w.slots <- struct{}{}:
				*held++
			case <-t.C:
				e.Release(s)
				return herald.Errorf(herald.CodeBusy, "fan-out queues are full, retry later")
			}
		}
	}
	if t != nil {
		t.Stop()
	}
	return nil
}

// Release gives back the slots s still holds (those its dispatches did not use: subscribers
// who left meanwhile).
func (e *Engine) Release(s *Slots) {
	for i := 0; i < s.n; i++ {
		held := s.held(i)
		for ; *held > 0; *held-- {
			<-e.workers[i].slots
		}
	}
}

// Dispatch sends frame to every subscriber of ch on this node but the connection numbered
// excl (0: none): one command to each worker that has subscribers. A command to worker i
// uses one of the slots s reserved there while there is one (s may be nil); without one (a
// subscriber arrived after the reservation, or a frame that is never refused) the send
// waits for room, which a worker always makes. m says what to observe once the last worker
// has queued the frame for its subscribers.
func (e *Engine) Dispatch(ch *Channel, frame []byte, excl uint64, s *Slots, m Measure) {
	track, ok := m.track(ch)
	if !ok {
		return
	}
	for i, w := range e.workers {
		if ch.wcount[i].Load() <= 0 {
			continue
		}
		c := cmd{op: opPublish, ch: ch, frame: frame, excl: excl, p: track}
		if s != nil {
			if held := s.held(i); *held > 0 {
				*held--
				c.slot = true
			}
		}
		w.inbox <- c
	}
}

// DispatchUntil is Dispatch with nothing reserved or measured, giving up when stop closes.
// It reports false when it gave up.
func (e *Engine) DispatchUntil(ch *Channel, frame []byte, stop <-chan struct{}) bool {
	for i, w := range e.workers {
		if ch.wcount[i].Load() <= 0 {
			continue
		}
		select {
		case w.inbox <- cmd{op: opPublish, ch: ch, frame: frame}:
		case <-stop:
			return false
		}
	}
	return true
}

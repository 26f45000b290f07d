package fanout_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/internal/poll"
)

// backlog is a transport whose kernel holds unread bytes while unread is above 0.
type backlog struct {
	rec
	unread atomic.Int32
}

func (b *backlog) Backlog() (int, int, error) { return int(b.unread.Load()), 0, nil }

// pingedWithBacklog attaches a connection that never answers, on an engine that pings after
// 300 ms of silence and waits 300 ms for the pong, its transport holding 40 bytes unread.
func pingedWithBacklog(t *testing.T) (*fanout.Engine, *backlog, *fanout.Conn) {
	e := newEngine(t, fanout.Config{Workers: 1, ActivityTimeout: 300 * time.Millisecond,
		PongTimeout: 300 * time.Millisecond, SweepInterval: 20 * time.Millisecond})
	b := &backlog{}
	b.unread.Store(40)
	return e, b, attach(e, e.NewGroup("app", fanout.Latencies{}), b)
}

// TestPongUnreadKept: a connection whose pong timeout passes while its bytes wait unread in
// the kernel (a node too busy to read) is kept and waited for again, and counted; once
// nothing waits unread it is closed with PongLost like any silent connection.
func TestPongUnreadKept(t *testing.T) {
	e, b, c := pingedWithBacklog(t)
	poll.Until(t, patience, "two pong timeouts forgiven", func() (bool, string) {
		return e.PongsUnread() >= 2, fmt.Sprintf("%d forgiven", e.PongsUnread())
	})
	if c.CloseCode() != 0 || e.PongTimeouts() != 0 {
		t.Fatalf("close code %d, pong timeouts %d with its bytes unread; want 0 and 0", c.CloseCode(), e.PongTimeouts())
	}
	if got := b.String(); !strings.HasPrefix(got, "ping;") || strings.Contains(got, "pong;") {
		t.Fatalf("it was written %q; want pings only", got)
	}
	b.unread.Store(0)
	poll.Until(t, patience, "closed for its missed pong", func() (bool, string) {
		return c.CloseCode() == 4201 && e.PongTimeouts() == 1,
			fmt.Sprintf("close code %d, pong timeouts %d", c.CloseCode(), e.PongTimeouts())
	})
	e.Sync()
	if got := b.String(); !strings.HasSuffix(got, "pong;") {
		t.Fatalf("it was written %q; want the PongLost frame last", got)
	}
}

// TestPongUnreadBounded: bytes that stay unread do not keep a connection forever: past the
// activity timeout and four pong timeouts of silence it is closed with PongLost.
func TestPongUnreadBounded(t *testing.T) {
	start := time.Now()
	e, _, c := pingedWithBacklog(t)
	poll.Until(t, patience, "closed for its missed pong", func() (bool, string) {
		return c.CloseCode() == 4201 && e.PongTimeouts() == 1,
			fmt.Sprintf("close code %d, pong timeouts %d, %d forgiven", c.CloseCode(), e.PongTimeouts(), e.PongsUnread())
	})
	if took := time.Since(start); took < 1200*time.Millisecond || e.PongsUnread() == 0 {
		t.Fatalf("closed after %v with %d pong timeouts forgiven; want about 1.5 s (300 ms + 4 × 300 ms), not under 1.2 s and some forgiven", took, e.PongsUnread())
	}
}

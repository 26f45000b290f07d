package session_test

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/session"
)

// TestStalledFrameClosedWith1008 sends, on subscribed connections, a frame header announcing
// 65,536 bytes and then only part of them: each connection must be closed with 1008 within
// about the frame timeout (at the defaults it used to hold on for the activity and pong
// timeouts, 150 s), and the node's counters must return to where they were.
func TestStalledFrameClosedWith1008(t *testing.T) {
	const timeout = 500 * time.Millisecond
	h, addr := startServer(t, session.Config{Workers: 2, FrameTimeout: timeout})
	baseG, baseFD := runtime.NumGoroutine(), openFDs()
	clients := dialSubscribers(t, addr, "stall", 20, nil)

	// The 64-bit length form, masked, then 100 of the 65,536 bytes.
	stall := append([]byte{0x81, 0x80 | 127}, binary.BigEndian.AppendUint64(nil, 65536)...)
	stall = append(stall, 1, 2, 3, 4)
	stall = append(stall, make([]byte, 100)...)
	start := time.Now()
	for _, c := range clients {
		if _, err := c.Conn.Write(stall); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range clients {
		code, err := c.ExpectClose(10 * time.Second)
		took := time.Since(start)
		if err != nil || code != 1008 {
			t.Fatalf("client %d: close %d, err %v after %v; want 1008 within about %v", i, code, err, took, timeout)
		}
		if took > timeout+3*time.Second {
			t.Fatalf("client %d: closed after %v; want within about %v", i, took, timeout)
		}
	}
	t.Logf("20 stalled frames closed with 1008 %v after they started", time.Since(start).Round(time.Millisecond))
	poll.Until(t, 10*time.Second, "the stalled connections released", func() (bool, string) {
		st := h.Stats()
		return st.Connections == 0 && st.Channels == 0, fmt.Sprintf("connections=%d channels=%d", st.Connections, st.Channels)
	})
	for _, c := range clients {
		c.Close()
	}
	backToBaseline(t, h, baseG, baseFD)
}

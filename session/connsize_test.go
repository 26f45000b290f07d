package session

import (
	"fmt"
	"runtime"
	"testing"
	"unsafe"

	"github.com/herald-rt/herald/fanout"
)

// TestConnSize holds a connection (fanout.Conn embedded) to the 176-byte size class: every
// idle connection pays for it, and about twice over in RSS, the Go heap growing to twice
// what is live before it collects (docs/benchmarks.md, idle memory per connection). A field
// more moves it to 192 bytes: move what few connections use into connExtra (made on first
// use) first, or find a field it can share a word with (fanout.Conn's ping and close times
// share one, its last-write time sits beside its close code; it keeps its number, not its
// socket id's string).
func TestConnSize(t *testing.T) {
	const budget = 176
	if got := unsafe.Sizeof(conn{}); got > budget {
		t.Errorf("session.conn is %d bytes (fanout.Conn %d of them), over its budget of %d",
			got, unsafe.Sizeof(fanout.Conn{}), budget)
	}
	if got := unsafe.Sizeof(sub{}); got > 16 {
		t.Errorf("a subscription is %d bytes, over its budget of 16 (two words)", got)
	}
}

// nopTransport accepts every write; it holds nothing, so that a benchmark counts the
// connection's own memory.
type nopTransport struct{}

func (nopTransport) Writev(bufs [][]byte) (int, bool, error) {
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	return n, false, nil
}
func (nopTransport) Shutdown()    {}
func (nopTransport) Close() error { return nil }

// BenchmarkIdleConn attaches b.N connections, each subscribed to one of 100 public channels,
// and reports the live heap they keep per connection (B/conn: the connection, its socket id,
// its subscription, the engine's and the channels' shares; not the socket's ws.Conn). The
// idle scenario's RSS per connection is about twice this plus the ws.Conn.
func BenchmarkIdleConn(b *testing.B) {
	s := testServer(b, Config{})
	names := make([]string, 100)
	for i := range names {
		names[i] = fmt.Sprint("idle-", i)
	}
	conns := make([]*conn, 0, b.N)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for i := range b.N {
		c := s.attachFake(nopTransport{})
		subscribeFake(b, s, c, names[i%len(names)])
		conns = append(conns, c)
	}
	s.fence()
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	kept := int64(after.HeapAlloc) - int64(before.HeapAlloc) - int64(cap(conns))*8 // less the test's own slice
	b.ReportMetric(float64(kept)/float64(b.N), "B/conn")
	runtime.KeepAlive(conns)
}

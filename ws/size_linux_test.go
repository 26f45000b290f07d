//go:build linux && !heraldportable

package ws

import (
	"testing"
	"unsafe"
)

// TestConnSize holds Conn to the 64-byte size class. Every idle connection pays for it, and
// about twice over in RSS: the Go heap grows to twice what is live before it collects. It is
// 64 bytes, the whole class: a field more moves it to 80. What a connection holds only now
// and then (a partial frame, a fragmented message) sits behind a pointer: keep it so.
func TestConnSize(t *testing.T) {
	if got, budget := unsafe.Sizeof(Conn{}), uintptr(64); got > budget {
		t.Errorf("ws.Conn is %d bytes, over its budget of %d", got, budget)
	}
}

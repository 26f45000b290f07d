//go:build linux && !heraldportable

package ws

import (
	"testing"
	"unsafe"
)

// TestConnSize holds Conn to the 80-byte size class. Every idle connection pays for it, and
// twice over in RSS: the Go heap grows to twice what is live before it collects. A field
// more (or a slice where a pointer does, as msg) moves it to 96 bytes; make room first (the
// read state's small fields share one word, since in its padding) or move what few
// connections use behind a pointer.
func TestConnSize(t *testing.T) {
	if got, budget := unsafe.Sizeof(Conn{}), uintptr(80); got > budget {
		t.Errorf("ws.Conn is %d bytes, over its budget of %d", got, budget)
	}
}

package nats

import "sync"

// Encoding buffers are pooled: nats.go copies a published message into its own writer, so
// the encoding is garbage as soon as Publish returns.
var bufs sync.Pool

func getBuf(n int) *[]byte {
	if p, ok := bufs.Get().(*[]byte); ok && cap(*p) >= n {
		return p
	}
	b := make([]byte, 0, max(n, 512))
	return &b
}

func putBuf(p *[]byte) {
	if cap(*p) <= 64<<10 { // do not pin buffers of rare large payloads
		bufs.Put(p)
	}
}

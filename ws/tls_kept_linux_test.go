//go:build linux && !heraldportable

package ws

// asTLSKept returns the ciphertext c's TLS layer keeps back for the kernel.
func asTLSKept(c *Conn) []byte {
	h := asTLS(c).h
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]byte(nil), h.out...)
}

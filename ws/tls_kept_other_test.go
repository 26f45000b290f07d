//go:build !linux || heraldportable

package ws

// asTLSKept: the portable engine keeps nothing back (its writer goroutine writes the tls.Conn).
func asTLSKept(*Conn) []byte { return nil }

package broker

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/herald-rt/herald"
)

// busSizes are payload sizes of the bus's messages: a small event (the benchmarks' 100-byte
// data in its Pusher envelope), a state announcement, a 1 KiB and a 10 KiB event.
var busSizes = []int{150, 400, 1200, 10000}

// BenchmarkAuthMAC compares the two MACs considered for the bus, each over one whole encoded
// message: HMAC-SHA256 (a reused hash.Hash, Reset per message) and AES-256-GCM's tag over the
// message as additional data (the one Auth uses, its nonce unique per key). docs/benchmarks.md
// records the choice.
func BenchmarkAuthMAC(b *testing.B) {
	key := []byte("0123456789abcdef0123456789abcdef")
	for _, n := range busSizes {
		m := herald.BusMessage{Kind: herald.BusEvent, App: "app-id", Channel: "private-x", Node: "node-a", Payload: make([]byte, n)}
		msg := AppendMessage(nil, m)
		b.Run(fmt.Sprintf("hmac-sha256/%d", n), func(b *testing.B) {
			h := hmac.New(sha256.New, key)
			var sum [sha256.Size]byte
			b.SetBytes(int64(len(msg)))
			b.ReportAllocs()
			for b.Loop() {
				h.Reset()
				h.Write(msg)
				h.Sum(sum[:0])
			}
		})
		b.Run(fmt.Sprintf("aes-gcm-tag/%d", n), func(b *testing.B) {
			a, err := NewAuth(AuthConfig{Secret: key}, "herald", "node-a")
			if err != nil {
				b.Fatal(err)
			}
			nonce := make([]byte, 12)
			tag := make([]byte, 0, 16)
			b.SetBytes(int64(len(msg)))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				nonce[11] = byte(i)
				tag = a.seal.Seal(tag[:0], nonce, nil, msg)
			}
		})
	}
}

// BenchmarkAuthSeal measures Seal and Open of one message (sealed, and sealed and
// encrypted) beside the unsealed encoding and decoding they replace.
func BenchmarkAuthSeal(b *testing.B) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	for _, n := range busSizes {
		m := herald.BusMessage{Kind: herald.BusEvent, App: "app-id", Channel: "private-x", Node: "node-a", Payload: make([]byte, n)}
		b.Run(fmt.Sprintf("plain/%d", n), func(b *testing.B) {
			buf := make([]byte, 0, EncodedSize(m))
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				buf = AppendMessage(buf[:0], m)
				if _, err := DecodeMessage(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
		for _, enc := range []bool{false, true} {
			name := "sealed"
			if enc {
				name = "encrypted"
			}
			b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
				now := time.Now()
				clock := func() time.Time { return now }
				send, err := NewAuth(AuthConfig{Secret: secret, Encrypt: enc, Now: clock}, "herald", "node-a")
				if err != nil {
					b.Fatal(err)
				}
				recv, err := NewAuth(AuthConfig{Secret: secret, Now: clock}, "herald", "node-b")
				if err != nil {
					b.Fatal(err)
				}
				buf := make([]byte, 0, SealedSize(m))
				b.SetBytes(int64(n))
				b.ReportAllocs()
				for b.Loop() {
					buf = send.Seal(buf[:0], m)
					if _, err := recv.Open(buf); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

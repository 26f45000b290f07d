package hub

import (
	"testing"

	"github.com/herald-rt/herald/pusher"
)

// BenchmarkSubscribe subscribes one connection to a channel nobody else has and unsubscribes
// it (the channel is created and forgotten each time: the occupied/vacated edges), then the
// same with 100 other subscribers on the channel (no edge).
func BenchmarkSubscribe(b *testing.B) {
	for _, others := range []int{0, 100} {
		name := map[int]string{0: "edge", 100: "others=100"}[others]
		b.Run(name, func(b *testing.B) {
			h, _ := setupBroadcastWith(b, others, Config{Workers: 2})
			c := h.attachFake(&memTransport{})
			h.fence()
			sub := pusher.Message{Event: "pusher:subscribe", Data: []byte(`{"channel":"bench"}`)}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				h.subscribe(c, sub)
				h.unsubscribe(c, 0)
				if i%1024 == 0 {
					h.fence()
				}
			}
			h.fence()
		})
	}
}

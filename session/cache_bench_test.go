package session

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/herald-rt/herald"
)

// BenchmarkPublishCache publishes to cache channels: "same" to one channel with one
// subscriber (each publish replaces the cached event), "distinct" to a new channel each time,
// with no subscriber, past the default bounds (each publish evicts the oldest entry once
// 16 MiB are held). Run "distinct" with a fixed -benchtime (e.g. 20000x): without a bound
// it holds every event.
func BenchmarkPublishCache(b *testing.B) {
	for _, size := range []int{100, 10_000} {
		data := strings.Repeat("x", size)
		b.Run(fmt.Sprintf("same/bytes=%d", size), func(b *testing.B) {
			h, _ := setupBroadcastWith(b, 0, Config{Workers: 2})
			subscribeFake(b, h, h.attachFake(&memTransport{}), "cache-bench")
			h.fence()
			ev := herald.Event{Name: "tick", Channel: "cache-bench", Data: data}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := h.Publish("app-id", ev); err != nil {
					b.Fatal(err)
				}
				h.fence()
			}
		})
		b.Run(fmt.Sprintf("distinct/bytes=%d", size), func(b *testing.B) {
			h, _ := setupBroadcastWith(b, 0, Config{Workers: 2})
			names := make([]string, b.N)
			for i := range names {
				names[i] = "cache-bench-" + strconv.Itoa(i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := h.Publish("app-id", herald.Event{Name: "tick", Channel: names[i], Data: data}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

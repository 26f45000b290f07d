package session

import (
	"fmt"
	"testing"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/pusher"
)

// BenchmarkSubscribe subscribes one connection to a channel nobody else has and unsubscribes
// it (the channel is created and forgotten each time: the occupied/vacated edges), then the
// same with 100 other subscribers on the channel (no edge); "observed" with an observer that
// wants what webhooks want of a subscription (occupied, vacated, subscription count).
func BenchmarkSubscribe(b *testing.B) {
	webhooks := herald.Activities(herald.ChannelOccupied, herald.ChannelVacated, herald.SubscriptionCount)
	for _, observed := range []bool{false, true} {
		for _, others := range []int{0, 100} {
			name := map[int]string{0: "edge", 100: "others=100"}[others]
			if observed {
				name = "observed/" + name
			}
			b.Run(name, func(b *testing.B) {
				h, _ := setupBroadcastWith(b, others, Config{Workers: 2})
				if observed {
					if _, err := h.Observe("app-id", nullObserver{want: webhooks}); err != nil {
						b.Fatal(err)
					}
				}
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
}

// BenchmarkBroadcastAPIObserved is BenchmarkBroadcast with an observer that wants API events
// (a console page open on the app): one Activity per publish, nothing per recipient.
func BenchmarkBroadcastAPIObserved(b *testing.B) {
	for _, n := range []int{1, 1000} {
		b.Run(fmt.Sprintf("subs=%d", n), func(b *testing.B) {
			h, _ := setupBroadcastWith(b, n, Config{Workers: 2})
			if _, err := h.Observe("app-id", nullObserver{want: herald.Activities(herald.APIEvent)}); err != nil {
				b.Fatal(err)
			}
			runBroadcast(b, h, n, benchEvent)
		})
	}
}

package httpapi_test

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/httpapi"
	"github.com/herald-rt/herald/pusher"
)

// listServer answers Channels with a fixed list, in no order, as a session server's shards do.
type listServer struct {
	busDownServer
	stats []herald.ChannelStat
}

func (h *listServer) Channels(appID, prefix string) []herald.ChannelStat {
	return append([]herald.ChannelStat(nil), h.stats...)
}

// BenchmarkListChannels measures GET /channels?info=subscription_count over 10,000 occupied
// channels: what the handler itself costs (the node's list is copied, as the node builds one
// per call).
func BenchmarkListChannels(b *testing.B) {
	app := herald.App{ID: "1", Key: "key-one", Secret: "secret-one"}
	apps := herald.NewStaticApps([]herald.App{app})
	a, _ := apps.AppByID("1")
	h := &listServer{}
	for i := range 10000 {
		h.stats = append(h.stats, herald.ChannelStat{Name: "presence-room-" + strconv.Itoa(i), SubscriptionCount: i % 7, UserCount: i % 5})
	}
	rand.Shuffle(len(h.stats), func(i, j int) { h.stats[i], h.stats[j] = h.stats[j], h.stats[i] })
	health := func() httpapi.HealthReport { return httpapi.HealthReport{Status: "ok"} }
	api := httpapi.New(httpapi.Config{}, apps, h, health, nil, nil)
	for _, info := range []string{"", "subscription_count,user_count"} {
		b.Run("info="+info, func(b *testing.B) {
			extra := url.Values{"filter_by_prefix": {"presence-"}}
			if info != "" {
				extra.Set("info", info)
			}
			b.ReportAllocs()
			for b.Loop() {
				q := pusher.SignRequest(a, "GET", "/apps/1/channels", extra, nil, time.Now())
				w := httptest.NewRecorder()
				api.ServeHTTP(w, httptest.NewRequest("GET", "/apps/1/channels?"+q.Encode(), nil))
				if w.Code != http.StatusOK {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}

package ingest

import (
	"context"
	"log/slog"
	"strconv"
	"testing"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/session"
)

// BenchmarkHandle is the ingest path's own cost per record: templates rendered from the
// value's JSON, the event validated and handed to a real session server with no subscriber, 500 records
// per Handle as a Kafka poll. The "kept" cases' server is a Reconnector, as on a node of a NATS
// cluster: the pipeline also keeps what it hands off, to hand it off again (resend.go).
func BenchmarkHandle(b *testing.B) {
	for _, c := range []struct {
		name, channel, data string
		kept                bool
	}{
		{"literal", "trades", "", false},
		{"value.field", "{value.ch}", "", false},
		{"value.field+data", "{value.ch}", "{value.px}", false},
		{"literal,kept", "trades", "", true},
		{"value.field+data,kept", "{value.ch}", "{value.px}", true},
	} {
		b.Run(c.name, func(b *testing.B) {
			app := &herald.App{ID: "app", Key: "key", Secret: "secret"}
			h, err := session.New(session.Config{}, herald.NewStaticApps([]herald.App{*app}), cluster.LocalState(cluster.Config{}), slog.New(slog.DiscardHandler))
			if err != nil {
				b.Fatal(err)
			}
			defer h.Shutdown(context.Background())
			cfg := Config{Name: "b", App: app, Channel: mustTemplate(b, c.channel), Event: mustTemplate(b, "trade")}
			if c.data != "" {
				cfg.Data = mustTemplate(b, c.data)
			}
			var pub Publisher = h
			if c.kept {
				pub = reconnectingServer{h}
			}
			p, err := New(cfg, pub)
			if err != nil {
				b.Fatal(err)
			}
			recs := make([]Record, 500)
			for i := range recs {
				recs[i] = Record{Topic: "trades", Position: strconv.Itoa(i),
					Value: []byte(`{"ch":"BTC.trade","seq":` + strconv.Itoa(i) + `,"px":101.25,"qty":3,"side":"buy"}`)}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += len(recs) {
				if _, err := p.Handle(context.Background(), recs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// reconnectingServer is a session server whose bus connection is never replaced.
type reconnectingServer struct{ *session.Server }

func (reconnectingServer) Connection() uint64 { return 0 }

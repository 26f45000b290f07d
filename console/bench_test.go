package console

import (
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/session"
)

// BenchmarkPublishConsole publishes 100-byte events through a real session server to 10 WebSocket
// subscribers on loopback and waits for every delivery: with no console ("none"), with the
// console's observer attached and no page open ("closed": the node asks Wants, which is 0),
// and with a page watching the app ("open": every publish is reported, sampled at 100/s).
func BenchmarkPublishConsole(b *testing.B) {
	for _, mode := range []string{"none", "closed", "open"} {
		b.Run(mode, func(b *testing.B) { benchPublishConsole(b, mode) })
	}
}

func benchPublishConsole(b *testing.B, mode string) {
	const subs, window = 10, 256
	app := &herald.App{ID: "a1", Key: "k1", Secret: "s1", Limits: herald.DefaultLimits}
	h, err := session.New(session.Config{Workers: 2, MaxConnections: 1000}, herald.NewStaticApps([]herald.App{*app}), cluster.LocalState(cluster.Config{}), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Shutdown(b.Context())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeWS(w, r, strings.TrimPrefix(r.URL.Path, "/app/"))
	}), ReadHeaderTimeout: patience}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	if mode != "none" {
		c := New(Config{Token: testToken, Apps: []string{"a1"}, Source: &fakeSource{}, Refresh: h.RefreshObservers}, nil)
		defer c.Close()
		if _, err := h.Observe("a1", c.Observer("a1")); err != nil {
			b.Fatal(err)
		}
		if mode == "open" {
			w := c.watches["a1"]
			w.attach()
			h.RefreshObservers("a1")
			defer w.detach()
		}
	}

	var got atomic.Int64
	for i := 0; i < subs; i++ {
		cl, err := wstest.Dial(ln.Addr().String(), "/app/k1?protocol=7")
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		if _, err := cl.SocketID(patience); err != nil {
			b.Fatal(err)
		}
		if err := cl.Subscribe("bench", "", ""); err != nil {
			b.Fatal(err)
		}
		if _, err := cl.Expect("pusher_internal:subscription_succeeded", patience); err != nil {
			b.Fatal(err)
		}
		go func() {
			for {
				if _, err := cl.Read(time.Hour); err != nil {
					return
				}
				got.Add(1)
			}
		}()
	}
	ev := herald.Event{Name: "tick", Channel: "bench", Data: strings.Repeat("x", 100)}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// At most window events in flight per subscriber: the subscribers read slower than a
		// publisher writes, and would be closed as slow consumers.
		for int64(i)-got.Load()/subs > window {
			time.Sleep(50 * time.Microsecond)
		}
		for {
			err := h.Publish("a1", ev)
			if err == nil {
				break
			}
			if herald.CodeOf(err) != herald.CodeBusy {
				b.Fatal(err)
			}
		}
	}
	want := int64(b.N) * subs
	for start := time.Now(); got.Load() < want; time.Sleep(100 * time.Microsecond) {
		if time.Since(start) > patience {
			b.Fatalf("%d of %d deliveries", got.Load(), want)
		}
	}
	b.StopTimer()
}

// TestClosedConsoleCostsNothing: a publish allocates no more with the console's observer
// attached and no page open than with no console; with a page open it does (each publish is
// reported), so the measure is not vacuous.
func TestClosedConsoleCostsNothing(t *testing.T) {
	measure := func(mode string) float64 {
		app := &herald.App{ID: "a1", Key: "k1", Secret: "s1", Limits: herald.DefaultLimits}
		h, err := session.New(session.Config{Workers: 2}, herald.NewStaticApps([]herald.App{*app}), cluster.LocalState(cluster.Config{}), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Shutdown(t.Context())
		if mode != "none" {
			c := New(Config{Token: testToken, Apps: []string{"a1"}, Source: &fakeSource{}, Refresh: h.RefreshObservers}, nil)
			defer c.Close()
			if _, err := h.Observe("a1", c.Observer("a1")); err != nil {
				t.Fatal(err)
			}
			if mode == "open" {
				c.watches["a1"].attach()
				h.RefreshObservers("a1")
			}
		}
		ev := herald.Event{Name: "tick", Channel: "nobody", Data: "x"}
		return testing.AllocsPerRun(500, func() {
			if err := h.Publish("a1", ev); err != nil {
				t.Fatal(err)
			}
		})
	}
	none, closed, open := measure("none"), measure("closed"), measure("open")
	t.Logf("allocations per publish: no console %v, console closed %v, open %v", none, closed, open)
	if closed != none {
		t.Errorf("a closed console costs a publish %v allocations more", closed-none)
	}
	if open <= none {
		t.Errorf("an open console costs nothing (%v vs %v): the measure is vacuous", open, none)
	}
}

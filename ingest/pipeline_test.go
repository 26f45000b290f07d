package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald"
)

// publisherStub records what is published; while refuse > 0 it refuses (CodeBusy) and counts down.
type publisherStub struct {
	mu      sync.Mutex
	got     []herald.Event
	calls   int
	refuse  int
	refused chan struct{} // signalled on each refusal, when not nil
	block   bool          // each refusal waits until its signal is received
}

func (h *publisherStub) Publish(app string, evs ...herald.Event) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refuse != 0 {
		h.refuse--
		if h.refused != nil && h.block {
			h.refused <- struct{}{}
		} else if h.refused != nil {
			select {
			case h.refused <- struct{}{}:
			default:
			}
		}
		return herald.Errorf(herald.CodeBusy, "fan-out queues are full, retry later")
	}
	h.calls++
	h.got = append(h.got, evs...)
	return nil
}

func (h *publisherStub) events() []herald.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]herald.Event(nil), h.got...)
}

func mustTemplate(t testing.TB, s string) *Template {
	t.Helper()
	tp, err := ParseTemplate(s)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

type latencies struct{ n int }

func (l *latencies) Observe(float64) { l.n++ }

func newPipeline(t *testing.T, pub Publisher, mod func(*Config)) *Pipeline {
	t.Helper()
	cfg := Config{Name: "t", Kind: "test", App: &herald.App{ID: "app"},
		Channel: mustTemplate(t, "{value.symbol}.trade"), Event: mustTemplate(t, "trade")}
	if mod != nil {
		mod(&cfg)
	}
	p, err := New(cfg, pub)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func trade(sym string, i int) Record {
	return Record{Topic: "trades", Position: Offset(int64(i)), Time: time.Now(),
		Value: fmt.Appendf(nil, `{"symbol":%q,"seq":%d}`, sym, i)}
}

func TestHandleInOrderAndBatched(t *testing.T) {
	pub := &publisherStub{}
	lat := &latencies{}
	p := newPipeline(t, pub, func(c *Config) { c.BatchEvents = 4; c.Handoff = lat })
	var recs []Record
	for i := range 10 {
		recs = append(recs, trade([]string{"BTC", "ETH"}[i%2], i))
	}
	n, err := p.Handle(context.Background(), recs)
	if n != 10 || err != nil {
		t.Fatalf("Handle = %d, %v", n, err)
	}
	got := pub.events()
	if len(got) != 10 {
		t.Fatalf("%d events, want 10", len(got))
	}
	for i, ev := range got {
		if ev.Data != string(recs[i].Value) || ev.Name != "trade" || ev.Channel != []string{"BTC", "ETH"}[i%2]+".trade" ||
			!ev.Origin.Equal(recs[i].Time) {
			t.Errorf("event %d = %+v", i, ev)
		}
	}
	if pub.calls != 3 { // 4 + 4 + 2
		t.Errorf("%d publishes, want 3 batches of at most 4", pub.calls)
	}
	st := p.Stats()
	if st.Consumed != 10 || st.Published != 10 || lat.n != 10 {
		t.Errorf("consumed %d published %d latencies %d, want 10 each", st.Consumed, st.Published, lat.n)
	}
}

func TestHandleBadRecords(t *testing.T) {
	pub := &publisherStub{}
	type dead struct {
		pos    string
		reason Reason
	}
	var dl []dead
	p := newPipeline(t, pub, func(c *Config) {
		c.Data = mustTemplate(t, "{value.payload}")
		c.Event = mustTemplate(t, "{value.event}")
		c.App.Limits.MaxEventPayloadBytes = 100
	})
	p.SetDeadLetter(func(_ context.Context, r *Record, reason Reason, _ string) error {
		dl = append(dl, dead{r.Position, reason})
		return nil
	})
	vals := []string{
		`{"symbol":"BTC","event":"trade","payload":"ok-0"}`,
		`{not json`,
		`{"symbol":"BTC","event":"trade"}`,
		`{"symbol":"BTC!","event":"trade","payload":"x"}`,
		`{"symbol":"BTC","event":"","payload":"x"}`,
		`{"symbol":"BTC","event":"trade","payload":"` + strings.Repeat("x", 101) + `"}`,
		`{"symbol":"ETH","event":"trade","payload":{"px":1}}`,
	}
	var recs []Record
	for i, v := range vals {
		recs = append(recs, Record{Topic: "trades", Position: Offset(int64(i)), Value: []byte(v)})
	}
	n, err := p.Handle(context.Background(), recs)
	if n != len(recs) || err != nil {
		t.Fatalf("Handle = %d, %v", n, err)
	}
	got := pub.events()
	if len(got) != 2 || got[0].Data != "ok-0" || got[1].Data != `{"px":1}` || got[1].Channel != "ETH.trade" {
		t.Fatalf("events %+v", got)
	}
	want := []dead{{"1", ReasonInvalidJSON}, {"2", ReasonMissingField}, {"3", ReasonInvalidChannel}, {"4", ReasonInvalidEvent}, {"5", ReasonTooLarge}}
	if fmt.Sprint(dl) != fmt.Sprint(want) {
		t.Errorf("dead letters %v, want %v", dl, want)
	}
	st := p.Stats()
	for _, w := range want {
		if st.Bad[w.reason] != 1 {
			t.Errorf("bad[%s] = %d, want 1", w.reason, st.Bad[w.reason])
		}
	}
	if st.DeadLettered != 5 {
		t.Errorf("dead lettered %d, want 5", st.DeadLettered)
	}
}

func TestHandleDeadLetterFailureSkips(t *testing.T) {
	p := newPipeline(t, &publisherStub{}, nil)
	calls := 0
	p.SetDeadLetter(func(context.Context, *Record, Reason, string) error { calls++; return fmt.Errorf("broker down") })
	n, err := p.Handle(context.Background(), []Record{{Value: []byte("{")}, trade("BTC", 1)})
	if n != 2 || err != nil || calls != deadLetterAttempts || p.Stats().DeadLetterErrors != 1 {
		t.Fatalf("Handle = %d, %v; %d attempts, stats %+v", n, err, calls, p.Stats())
	}
}

func TestHandleBackpressure(t *testing.T) {
	pub := &publisherStub{refuse: 5, refused: make(chan struct{}), block: true}
	p := newPipeline(t, pub, nil)
	p.SetState(StateUp, nil)
	done := make(chan error, 1)
	go func() {
		_, err := p.Handle(context.Background(), []Record{trade("BTC", 0), trade("BTC", 1)})
		done <- err
	}()
	<-pub.refused // the first refusal
	<-pub.refused // the second: the pipeline paused after the first and is trying again
	if st := p.Stats().State; st != StatePaused {
		t.Errorf("state while refused %s, want paused", st)
	}
	for range 3 {
		<-pub.refused
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	if st.PublishRetries != 5 || st.Published != 2 || st.State != StateUp || len(pub.events()) != 2 {
		t.Errorf("after the node took them: %+v, %d events", st, len(pub.events()))
	}
}

// TestHandleStopWhileRefused: a Handle stopped while the node refuses returns the records
// done before the refused batch, so the source commits none of the rest.
func TestHandleStopWhileRefused(t *testing.T) {
	pub := &publisherStub{refused: make(chan struct{}, 1)}
	p := newPipeline(t, pub, func(c *Config) { c.BatchEvents = 2 })
	ctx, cancel := context.WithCancel(context.Background())
	recs := []Record{trade("BTC", 0), trade("BTC", 1), trade("BTC", 2), trade("BTC", 3)}
	var n int
	var err error
	done := make(chan struct{})
	pub.mu.Lock()
	pub.refuse = -1 // refuse until told otherwise
	pub.calls = 0
	pub.mu.Unlock()
	go func() { n, err = p.Handle(ctx, recs); close(done) }()
	<-pub.refused
	cancel()
	<-done
	if n != 0 || err == nil {
		t.Fatalf("Handle = %d, %v; want 0 and the context's error", n, err)
	}
	// Refusing only the second batch: the first two are done.
	pub.mu.Lock()
	pub.refuse = 0
	pub.mu.Unlock()
	p2 := newPipeline(t, &flaky{after: 1}, func(c *Config) { c.BatchEvents = 2 })
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if n, err := p2.Handle(ctx2, recs); n != 2 || err == nil {
		t.Fatalf("second batch refused: Handle = %d, %v; want 2 and an error", n, err)
	}
}

// flaky takes its first `after` publishes and refuses the rest.
type flaky struct{ after int }

func (f *flaky) Publish(string, ...herald.Event) error {
	if f.after == 0 {
		return herald.Errorf(herald.CodeUnavailable, "the cluster bus is unreachable")
	}
	f.after--
	return nil
}

func TestPusherFormat(t *testing.T) {
	pub := &publisherStub{}
	p, err := New(Config{Name: "p", App: &herald.App{ID: "app"}, Format: FormatPusher}, pub)
	if err != nil {
		t.Fatal(err)
	}
	at := time.UnixMilli(1_764_000_000_123)
	recs := []Record{
		{Value: []byte(`{"name":"bid","channel":"auction-1","data":"{\"amount\":5}"}`)},
		{Value: []byte(`{"name":"bid","channels":["a","b","a"],"data":{"amount":6},"socket_id":"123.456"}`), Time: at},
		{Value: []byte(`{"name":"bid","channel":"a","channels":["b"]}`)},
		{Value: []byte(`{"name":"bid","channel":"a","socket_id":"nope"}`)},
		{Value: []byte(`{"channel":"a"}`)},
		{Value: []byte(`[1]`)},
	}
	if n, err := p.Handle(context.Background(), recs); n != len(recs) || err != nil {
		t.Fatalf("Handle = %d, %v", n, err)
	}
	got := pub.events()
	want := []herald.Event{
		{Name: "bid", Channel: "auction-1", Data: `{"amount":5}`},
		{Name: "bid", Channel: "a", Data: `{"amount":6}`, SocketID: "123.456", Origin: at},
		{Name: "bid", Channel: "b", Data: `{"amount":6}`, SocketID: "123.456", Origin: at},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events %+v\nwant %+v", got, want)
	}
	st := p.Stats()
	if st.Bad[ReasonInvalidBody] != 2 || st.Bad[ReasonInvalidEvent] != 1 || st.Bad[ReasonInvalidJSON] != 1 {
		t.Errorf("bad %v", st.Bad)
	}
}

// TestBadRecordLogRateLimited: a flood of bad records logs one line (per second), naming the
// reason and where the record was.
func TestBadRecordLogRateLimited(t *testing.T) {
	var buf strings.Builder
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(b []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(b)
	}), nil))
	p := newPipeline(t, &publisherStub{}, func(c *Config) { c.Logger = log })
	var recs []Record
	for i := range 100 {
		recs = append(recs, Record{Topic: "trades", Partition: 2, Position: Offset(int64(100 + i)), Value: []byte("{")})
	}
	if n, err := p.Handle(context.Background(), recs); n != 100 || err != nil {
		t.Fatalf("Handle = %d, %v", n, err)
	}
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	if lines := strings.Count(out, "\n"); lines != 1 {
		t.Fatalf("%d log lines for 100 bad records, want 1:\n%s", lines, out)
	}
	for _, want := range []string{"reason=invalid_json", "topic=trades", "partition=2", "offset=100", "source=t"} {
		if !strings.Contains(out, want) {
			t.Errorf("log line lacks %s: %s", want, out)
		}
	}
	if p.Stats().Bad[ReasonInvalidJSON] != 100 {
		t.Errorf("counted %d", p.Stats().Bad[ReasonInvalidJSON])
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

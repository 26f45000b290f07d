package kafka_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/herald-rt/herald/ingest"
	"github.com/herald-rt/herald/ingest/ingesttest"
	"github.com/herald-rt/herald/ingest/kafka"
	"github.com/herald-rt/herald/internal/servicetest"
)

// TestDeliversInOrderAndCommits: records of three partitions reach the hub, each partition's
// in order; a second source of the same group, started after the first closed, gets only
// the records produced since: the first committed everything it handed on.
func TestDeliversInOrderAndCommits(t *testing.T) {
	k := servicetest.SharedKafka(t)
	cl := admin(t, k)
	topic, group := unique(t, "topic"), unique(t, "group")
	createTopic(t, cl, topic, 3)
	for p := range int32(3) {
		var vs []string
		for i := range 200 {
			vs = append(vs, rec("ch"+strconv.Itoa(int(p)), i))
		}
		produce(t, cl, topic, p, vs...)
	}
	pub := &ingesttest.Sink{}
	s := start(t, k, pub, topic, group, nil)
	waitFor(t, "600 events", func() bool { return len(pub.Events()) >= 600 })
	n := ingesttest.CheckOrder(t, pub.Events())
	if len(pub.Events()) != 600 || n["ch0"] != 200 || n["ch1"] != 200 || n["ch2"] != 200 {
		t.Fatalf("got %d events, per channel %v; want 200 on each of 3", len(pub.Events()), n)
	}
	waitFor(t, "lag 0 on 3 partitions", func() bool {
		st := s.Stats()
		if len(st.Lag) != 3 {
			return false
		}
		for _, l := range st.Lag {
			if l.Records != 0 {
				return false
			}
		}
		return true
	})
	if st := s.Stats(); st.State != ingest.StateUp || st.Consumed != 600 || st.Published != 600 || st.CommitErrors != 0 {
		t.Errorf("stats %+v", st)
	}
	ingesttest.Stop(t, s)

	produce(t, cl, topic, 1, rec("ch1", 200), rec("ch1", 201))
	pub2 := &ingesttest.Sink{}
	start(t, k, pub2, topic, group, nil)
	waitFor(t, "the 2 new records", func() bool { return len(pub2.Events()) >= 2 })
	produce(t, cl, topic, 0, rec("ch0", 200)) // a marker: once it is in, nothing older is coming
	waitFor(t, "the marker", func() bool { return len(pub2.Events()) >= 3 })
	if got := pub2.Events(); len(got) != 3 || got[0].Data != "200" || got[1].Data != "201" || got[2].Channel != "ch0" {
		t.Fatalf("second source of the group got %+v; want only the records produced after the first closed", got)
	}
}

// TestBadRecordsSkippedCommittedDeadLettered: bad records do not stop the stream; they go to
// the dead-letter topic with their reason, and are committed like the rest.
func TestBadRecordsSkippedCommittedDeadLettered(t *testing.T) {
	k := servicetest.SharedKafka(t)
	cl := admin(t, k)
	topic, group, dlq := unique(t, "topic"), unique(t, "group"), unique(t, "dlq")
	createTopic(t, cl, topic, 1)
	createTopic(t, cl, dlq, 1)
	produce(t, cl, topic, 0, rec("a", 1), `{not json`, `{"seq":2}`, rec("bad channel!", 3), rec("a", 4))
	pub := &ingesttest.Sink{}
	s := start(t, k, pub, topic, group, func(c *kafka.Config) { c.DeadLetter = dlq })
	waitFor(t, "the two good records", func() bool { return len(pub.Events()) >= 2 })
	waitFor(t, "three bad records counted", func() bool {
		b := s.Stats().Bad
		return b[ingest.ReasonInvalidJSON] == 1 && b[ingest.ReasonMissingField] == 1 && b[ingest.ReasonInvalidChannel] == 1
	})
	if got := pub.Events(); got[0].Data != "1" || got[1].Data != "4" {
		t.Fatalf("events %+v", got)
	}

	// The dead letters, in order, with their reasons and origin.
	rd, err := kgo.NewClient(kgo.SeedBrokers(k.Addr()), kgo.ConsumeTopics(dlq), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var dead []*kgo.Record
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for len(dead) < 3 && ctx.Err() == nil {
		rd.PollFetches(ctx).EachRecord(func(r *kgo.Record) { dead = append(dead, r) })
	}
	hdr := func(r *kgo.Record, k string) string {
		for _, h := range r.Headers {
			if h.Key == k {
				return string(h.Value)
			}
		}
		return ""
	}
	want := []struct{ reason, offset, value string }{{"invalid_json", "1", `{not json`}, {"missing_field", "2", `{"seq":2}`}, {"invalid_channel", "3", rec("bad channel!", 3)}}
	if len(dead) != 3 {
		t.Fatalf("%d dead letters, want 3", len(dead))
	}
	for i, w := range want {
		r := dead[i]
		if hdr(r, "herald-reason") != w.reason || hdr(r, "herald-offset") != w.offset || string(r.Value) != w.value || hdr(r, "herald-topic") != topic {
			t.Errorf("dead letter %d: reason %q offset %q value %q; want %+v", i, hdr(r, "herald-reason"), hdr(r, "herald-offset"), r.Value, w)
		}
	}
	ingesttest.Stop(t, s)

	// All five were committed: a new source of the group starts after them.
	produce(t, cl, topic, 0, rec("a", 5))
	pub2 := &ingesttest.Sink{}
	s2 := start(t, k, pub2, topic, group, nil)
	waitFor(t, "the new record", func() bool { return len(pub2.Events()) >= 1 })
	if got := pub2.Events(); len(got) != 1 || got[0].Data != "5" || s2.Stats().Consumed != 1 {
		t.Fatalf("after a restart: events %+v, consumed %d; want only the new record", got, s2.Stats().Consumed)
	}
}

// TestBackpressureCommitsNothingRefused: while the hub refuses, the source retries, reports
// paused and commits nothing: a source closed meanwhile leaves every record to the next.
func TestBackpressureCommitsNothingRefused(t *testing.T) {
	k := servicetest.SharedKafka(t)
	cl := admin(t, k)
	topic, group := unique(t, "topic"), unique(t, "group")
	createTopic(t, cl, topic, 1)
	var vs []string
	for i := range 50 {
		vs = append(vs, rec("a", i))
	}
	produce(t, cl, topic, 0, vs...)
	goroutines := runtime.NumGoroutine()
	pub := ingesttest.Refusing()
	s := start(t, k, pub, topic, group, func(c *kafka.Config) { c.PollRecords = 20 })
	waitFor(t, "paused", func() bool { return s.Stats().State == ingest.StatePaused })
	waitFor(t, "a few retries", func() bool { return s.Stats().PublishRetries >= 3 })
	// Bounded: while the hub refuses, the source holds one poll and fetches nothing more.
	if c := s.Stats().Consumed; c > 20 {
		t.Errorf("%d records taken while the hub refused, want at most one poll (20)", c)
	}
	ingesttest.Stop(t, s)
	if len(pub.Events()) != 0 || s.Stats().Published != 0 {
		t.Fatalf("published %d while refused", len(pub.Events()))
	}
	waitFor(t, "the closed source's goroutines gone", func() bool { return runtime.NumGoroutine() <= goroutines })

	pub2 := &ingesttest.Sink{}
	start(t, k, pub2, topic, group, nil)
	waitFor(t, "all 50", func() bool { return len(pub2.Events()) >= 50 })
	if n := ingesttest.CheckOrder(t, pub2.Events()); n["a"] != 50 {
		t.Fatalf("got %v", n)
	}

	// Refused then accepted in one run: nothing lost, nothing twice.
	topic2 := unique(t, "topic")
	createTopic(t, cl, topic2, 1)
	pub3 := ingesttest.Refusing()
	s3 := start(t, k, pub3, topic2, unique(t, "group"), nil)
	produce(t, cl, topic2, 0, vs...)
	waitFor(t, "retries", func() bool { return s3.Stats().PublishRetries >= 2 })
	pub3.SetRefuse(false)
	waitFor(t, "all 50 after the refusals", func() bool { return len(pub3.Events()) >= 50 })
	if n := ingesttest.CheckOrder(t, pub3.Events()); n["a"] != 50 {
		t.Fatalf("got %v", n)
	}
	waitFor(t, "up again", func() bool { return s3.Stats().State == ingest.StateUp })
}

// TestRebalanceSharesAndHandsOver: two sources of one group (two nodes) share the
// partitions; when one closes, the other takes its partitions and every record is delivered.
func TestRebalanceSharesAndHandsOver(t *testing.T) {
	k := servicetest.SharedKafka(t)
	cl := admin(t, k)
	topic, group := unique(t, "topic"), unique(t, "group")
	createTopic(t, cl, topic, 4)
	a, b := &ingesttest.Sink{}, &ingesttest.Sink{}
	sa := start(t, k, a, topic, group, nil)
	sb := start(t, k, b, topic, group, nil)
	waitFor(t, "both sources up", func() bool { return sa.Stats().State == ingest.StateUp && sb.Stats().State == ingest.StateUp })
	seq := 0
	round := func() {
		for p := range int32(4) {
			produce(t, cl, topic, p, rec("p"+strconv.Itoa(int(p)), seq))
		}
		seq++
	}
	// Until both hold partitions (the group settles), every record reaches one of them.
	waitFor(t, "both sources consuming", func() bool {
		round()
		return len(a.Events()) > 0 && len(b.Events()) > 0
	})
	ingesttest.Stop(t, sb)
	for range 20 {
		round()
	}
	total := 4 * seq
	waitFor(t, "every record on the remaining node", func() bool {
		seen := map[string]bool{}
		for _, ev := range append(a.Events(), b.Events()...) {
			seen[ev.Channel+"/"+ev.Data] = true
		}
		return len(seen) == total
	})
	n := ingesttest.CheckOrder(t, a.Events()) // the remaining node's own events stay in order per partition
	for p := range 4 {
		if n["p"+strconv.Itoa(p)] == 0 {
			t.Errorf("the remaining node got nothing of partition %d", p)
		}
	}
}

// TestBrokerRestart: the broker killed mid-run: the source reports down, reconnects when it
// is back and resumes from its committed offsets, delivering every record.
func TestBrokerRestart(t *testing.T) {
	k := servicetest.SharedKafka(t)
	cl := admin(t, k)
	topic, group := unique(t, "topic"), unique(t, "group")
	createTopic(t, cl, topic, 1)
	pub := &ingesttest.Sink{}
	s := start(t, k, pub, topic, group, nil)
	produce(t, cl, topic, 0, rec("a", 0), rec("a", 1))
	waitFor(t, "the first records", func() bool { return len(pub.Events()) >= 2 })

	t0 := time.Now()
	k.Kill()
	defer func() { t.Logf("broker killed → all delivered: %v", time.Since(t0)) }()
	waitFor(t, "the source down", func() bool { return s.Stats().State == ingest.StateDown })
	t.Logf("down after %v", time.Since(t0))
	if err := k.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("broker restarted after %v", time.Since(t0))
	waitFor(t, "the source up", func() bool { return s.Stats().State == ingest.StateUp })
	t.Logf("up after %v", time.Since(t0))
	var vs []string
	for i := 2; i < 30; i++ {
		vs = append(vs, rec("a", i))
	}
	produce(t, cl, topic, 0, vs...)
	waitFor(t, "all 30", func() bool {
		seen := map[string]bool{}
		for _, ev := range pub.Events() {
			seen[ev.Data] = true
		}
		return len(seen) == 30
	})
	ingesttest.CheckOrder(t, ingesttest.Dedupe(pub.Events()))
}

// TestBrokerUnreachableAtStart: a source started while its broker is down reports down,
// then consumes once the broker is up.
func TestBrokerUnreachableAtStart(t *testing.T) {
	k := servicetest.SharedKafka(t)
	cl := admin(t, k)
	topic, group := unique(t, "topic"), unique(t, "group")
	createTopic(t, cl, topic, 1)
	produce(t, cl, topic, 0, rec("a", 0))
	k.Kill()
	pub := &ingesttest.Sink{}
	s := start(t, k, pub, topic, group, nil)
	waitFor(t, "the source down", func() bool { return s.Stats().State == ingest.StateDown && s.Stats().Error != "" })
	if err := k.Start(); err != nil {
		t.Fatal(err)
	}
	produce(t, cl, topic, 0, rec("a", 1))
	waitFor(t, "both records", func() bool { return len(ingesttest.Dedupe(pub.Events())) >= 2 })
	ingesttest.CheckOrder(t, ingesttest.Dedupe(pub.Events()))
	waitFor(t, "the source up", func() bool { return s.Stats().State == ingest.StateUp })
}

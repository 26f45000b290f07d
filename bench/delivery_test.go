package bench

import (
	"encoding/json"
	"testing"
	"time"
)

// frames as herald writes them (event first) and as floor's encoding/json map writes them
// (members sorted): the fast path must read both, since it runs once per delivery.
func benchFrames(seq int, sent int64) [][]byte {
	data := eventData(seq, sent, sent-int64(time.Second), 100)
	herald := []byte(`{"event":"bench","channel":"room-1","data":` + string(mustJSON(data)) + `}`)
	floor, _ := json.Marshal(map[string]string{"event": "bench", "channel": "room-1", "data": data})
	return [][]byte{herald, floor}
}

func TestParseBenchFast(t *testing.T) {
	sent := time.Now().UnixNano() // 19 digits
	for _, f := range benchFrames(12, sent) {
		seq, got, sched, ch, ok := parseBenchFast(f)
		if !ok || seq != 12 || got != sent || sched != sent-int64(time.Second) || string(ch) != "room-1" {
			t.Errorf("parseBenchFast(%s) = %d, %d, %d, %q, %v", f, seq, got, sched, ch, ok)
		}
	}
	for _, p := range []string{
		`{"event":"bench","channel":"x","data":"{\"seq\":1,\"t\":99999999999999999999}"}`, // over 2^63
		`{"event":"bench","channel":"x","data":"{\"seq\":,\"t\":1}"}`,
		`{"event":"bench","data":"{\"seq\":1,\"t\":1}"}`,
	} {
		if _, _, _, _, ok := parseBenchFast([]byte(p)); ok {
			t.Errorf("parseBenchFast(%s) = true; want false", p)
		}
	}
}

func TestParseBenchAllocatesNothing(t *testing.T) {
	for _, f := range benchFrames(3, time.Now().UnixNano()) {
		if n := testing.AllocsPerRun(100, func() { parseBench(f) }); n != 0 {
			t.Errorf("parseBench allocates %v times per frame; want 0", n)
		}
	}
}

func BenchmarkParseBench(b *testing.B) {
	f := benchFrames(3, time.Now().UnixNano())[0]
	b.ReportAllocs()
	for b.Loop() {
		parseBench(f)
	}
}

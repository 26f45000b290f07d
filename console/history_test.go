package console

import "testing"

// TestRingBounded: a node's ring keeps the last historyLen points whatever it is fed, in
// order, with the refusal rate taken between points.
func TestRingBounded(t *testing.T) {
	var r ring
	for i := int64(0); i < 3*historyLen; i++ {
		r.add(&nodeStats{TimeMS: i * 1000, Apps: []appStats{{Connections: i, InPerSec: 2, OutPerSec: 3}, {Connections: 1}},
			Refused: map[string]int64{"origin": 4 * i, "app_not_found": i}})
	}
	pts := r.since(-1)
	if len(pts) != historyLen || cap(r.pts) > historyLen+historyLen/4 {
		t.Fatalf("%d points (capacity %d), want %d", len(pts), cap(r.pts), historyLen)
	}
	first, last := pts[0], pts[len(pts)-1]
	if first.TimeMS != 2*historyLen*1000 || last.TimeMS != (3*historyLen-1)*1000 {
		t.Errorf("points from %d to %d ms, want the last %d", first.TimeMS, last.TimeMS, historyLen)
	}
	if last.Connections != 3*historyLen-1+1 || last.InPerSec != 2 || last.OutPerSec != 3 || last.RefusedPerS != 5 {
		t.Errorf("last point %+v: want the connections of both apps, 2 in/s, 3 out/s and 5 refusals/s", last)
	}
	if got := r.since(last.TimeMS - 1500); len(got) != 2 {
		t.Errorf("since the last 1.5 s: %d points, want 2", len(got))
	}
}

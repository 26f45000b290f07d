package bench

import "math/bits"

// track is one subscriber's view of one channel: which of the channel's events (numbered 1, 2,
// ... by the publisher) arrived, as a bitmap that grows with the highest seq seen. Only the
// client's reader touches it until the client has hung up.
type track struct {
	seen  []uint64 // bit s: seq s received
	from  int32    // seqs up to from were published before the subscription: not expected
	top   int32    // highest seq received
	recv  int32    // event frames, duplicates included
	dup   int32    // frames repeating a seq already received
	ooo   int32    // first receipts of a seq lower than one already received
	unexp int32    // frames whose seq is outside 1..maxSeq
}

// add records seq and reports whether it is the first receipt of an expected event.
func (t *track) add(seq, maxSeq int) bool {
	t.recv++
	if seq < 1 || seq > maxSeq {
		t.unexp++
		return false
	}
	w, bit := seq>>6, uint64(1)<<(seq&63)
	if w >= len(t.seen) {
		t.seen = append(t.seen, make([]uint64, w+1-len(t.seen))...)
	}
	if t.seen[w]&bit != 0 {
		t.dup++
		return false
	}
	t.seen[w] |= bit
	if int32(seq) < t.top {
		t.ooo++
	}
	t.top = max(t.top, int32(seq))
	return int32(seq) > t.from
}

// count returns how many seqs in (lo, hi] were received.
func (t *track) count(lo, hi int32) int64 {
	n := int64(0)
	for w, word := range t.seen {
		base := int32(w) << 6
		if base > hi {
			break
		}
		if base+63 <= lo {
			continue
		}
		for b := int32(0); b < 64; b++ {
			if s := base + b; s > lo && s <= hi && word&(1<<b) != 0 {
				n++
			}
		}
	}
	return n
}

// total returns how many distinct seqs were received.
func (t *track) total() int64 {
	n := 0
	for _, w := range t.seen {
		n += bits.OnesCount64(w)
	}
	return int64(n)
}

func (t *track) has(seq int32) bool {
	w := int(seq >> 6)
	return seq >= 0 && w < len(t.seen) && t.seen[w]&(1<<(seq&63)) != 0
}

// Delivery counts deliveries by exact sequence number, per subscriber and channel.
type Delivery struct {
	Expected   int64   `json:"expected"`     // events published to each subscription after it succeeded, summed
	Delivered  int64   `json:"delivered"`    // distinct expected (subscription, seq) pairs received
	Received   int64   `json:"received"`     // every event frame, duplicates included
	Percent    float64 `json:"percent"`      // Delivered / Expected × 100
	Missing    int64   `json:"missing"`      // expected pairs never received
	Duplicated int64   `json:"duplicated"`   // frames repeating a seq the subscription already had
	OutOfOrder int64   `json:"out_of_order"` // first receipts of a seq lower than one already received
	Unexpected int64   `json:"unexpected"`   // frames whose seq was never published
	// WaitSeconds is how long after the last publish the run waited for deliveries; Complete
	// says whether every expected delivery had arrived by then.
	WaitSeconds float64 `json:"wait_seconds"`
	Complete    bool    `json:"complete"`
}

// add counts one track whose channel's last published seq is to; failed lists seqs whose
// publish failed, which are neither expected nor counted.
func (d *Delivery) add(t *track, to int32, failed []int32) {
	d.Received += int64(t.recv)
	d.Duplicated += int64(t.dup)
	d.OutOfOrder += int64(t.ooo)
	d.Unexpected += int64(t.unexp)
	from := t.from
	expected, got := int64(0), int64(0)
	if to > from {
		expected, got = int64(to-from), t.count(from, to)
	}
	// Seqs over to were never published (the bitmap stores up to maxSeq).
	d.Unexpected += t.total() - t.count(-1, to)
	for _, f := range failed {
		if f > from && f <= to {
			expected--
			if t.has(f) {
				got--
			}
		}
	}
	d.Expected += expected
	d.Delivered += got
	d.Missing += expected - got
}

// merge adds another process's counts.
func (d *Delivery) merge(o Delivery) {
	d.Expected += o.Expected
	d.Delivered += o.Delivered
	d.Received += o.Received
	d.Missing += o.Missing
	d.Duplicated += o.Duplicated
	d.OutOfOrder += o.OutOfOrder
	d.Unexpected += o.Unexpected
}

func (d *Delivery) finish() {
	d.Percent = 0
	if d.Expected > 0 {
		d.Percent = float64(d.Delivered) * 100 / float64(d.Expected)
	}
}

// Clean reports whether nothing was missing, duplicated, out of order or unexpected.
func (d Delivery) Clean() bool {
	return d.Missing == 0 && d.Duplicated == 0 && d.OutOfOrder == 0 && d.Unexpected == 0
}

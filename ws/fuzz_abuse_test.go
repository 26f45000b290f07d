package ws

import (
	"encoding/binary"
	"math"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
)

// This file feeds hostile bytes to the engine: huge declared lengths, truncated frames,
// garbage, invalid UTF-8. FuzzParse (fuzz_test.go) checks the parser on its own; here the
// targets check what it holds in memory meanwhile, and run the same bytes through the real
// engine over a socket, handshake and pre-buffered bytes included.

// longFrame is a masked frame header declaring n payload bytes in the 64-bit form, followed
// by payload (which may be shorter than n: a truncated frame).
func longFrame(op Opcode, fin bool, n uint64, payload []byte) []byte {
	first := byte(op)
	if fin {
		first |= 0x80
	}
	b := append([]byte{first, 0x80 | 127}, binary.BigEndian.AppendUint64(nil, n)...)
	b = append(b, testMask[:]...)
	for i, x := range payload {
		b = append(b, x^testMask[i&3])
	}
	return b
}

// abuseSeeds are the nasty inputs FuzzParse's seeds lack. Every one runs in plain go test as
// a seed of the fuzz targets below.
func abuseSeeds() [][]byte {
	m := testMask
	cat := func(fs ...[]byte) []byte { return slices.Concat(fs...) }
	text := func(s string) []byte { return clientFrame(true, OpText, []byte(s), m) }
	return [][]byte{
		// Huge declared lengths: the largest legal 64-bit length, every bit set, the top bit
		// alone (which RFC 6455 forbids), 4 GiB, and just over the limit in both long forms.
		longFrame(OpBinary, true, math.MaxInt64, nil),
		longFrame(OpText, true, math.MaxUint64, []byte("x")),
		longFrame(OpText, true, 1<<63, nil),
		longFrame(OpText, true, 1<<32, pattern(64)),
		longFrame(OpText, true, fuzzMax+1, nil),
		{0x81, 0x80 | 126, 0x01, 0x2d, 1, 2, 3, 4}, // 16-bit form, 301 bytes
		{0x81, 0x80 | 126, 0xff, 0xff, 1, 2, 3, 4},
		// Legal but unusual lengths: the long forms used for short payloads.
		longFrame(OpText, true, 2, []byte("hi")),
		cat([]byte{0x81, 0x80 | 126, 0, 2}, m[:], []byte{'h' ^ m[0], 'i' ^ m[1]}),
		longFrame(OpPing, true, 126, nil), // control frame over 125 bytes in the 64-bit form
		// Truncated frames: one byte, a header cut in its length, in its mask, in its payload.
		{0x81},
		{0x81, 0xFF, 0, 0, 0},
		{0x81, 0x85, 1, 2},
		text("truncated")[:8],
		cat(text("whole"), text("and a cut one")[:7]),
		// Fragmented messages: a huge declared continuation, a fragmented message that grows
		// past the limit one byte at a time, a control frame over 125 bytes in the middle.
		cat(clientFrame(false, OpText, []byte("a"), m), longFrame(OpContinuation, true, math.MaxInt64, nil)),
		cat(clientFrame(false, OpBinary, pattern(150), m), clientFrame(false, OpContinuation, pattern(150), m),
			clientFrame(true, OpContinuation, []byte{1}, m)),
		cat(clientFrame(false, OpText, []byte("a"), m), clientFrame(true, OpPing, pattern(126), m)),
		cat(clientFrame(false, OpText, nil, m), clientFrame(false, OpContinuation, nil, m),
			clientFrame(true, OpContinuation, nil, m)),
		// Invalid UTF-8: overlong encodings, surrogates, code points past U+10FFFF, a rune cut
		// by the end of the message, a rune split over fragments (valid).
		text("\xc0\xaf"),
		text("\xed\xa0\x80"),
		text("\xf4\x90\x80\x80"),
		text("ok\xe2\x82"),
		cat(clientFrame(false, OpText, []byte("\xf0\x9f"), m), clientFrame(true, OpContinuation, []byte("\x98\x80"), m)),
		// Close frames: one byte of payload, codes that must not be sent, a reason that is
		// not UTF-8, and data after the close frame.
		clientFrame(true, OpClose, []byte{0x03}, m),
		clientFrame(true, OpClose, []byte{0x03, 0xed}, m),
		clientFrame(true, OpClose, []byte{0x00, 0x00}, m),
		clientFrame(true, OpClose, []byte{0x03, 0xe8, 0xff, 0xfe}, m),
		cat(clientFrame(true, OpClose, []byte{0x03, 0xe8}, m), text("after close")),
		// Garbage: reserved bits, every reserved opcode, unmasked frames, random bytes, HTTP.
		{0xF1, 0x80, 1, 2, 3, 4},
		cat(clientFrame(true, 3, nil, m), clientFrame(true, 7, nil, m)),
		clientFrame(true, 0xF, nil, m),
		{0x89, 0x00},
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		pattern(1000),
		// Many tiny frames and pings in one read.
		slices.Repeat(clientFrame(true, OpPing, nil, m), 200),
		slices.Repeat(text(""), 200),
	}
}

// parseBounds is how much a connection may hold between reads: at most one incomplete frame
// (header and payload of a message within the limit) and the fragments of one message. The
// buffers' capacities may exceed their lengths by what one read brought in and append's
// growth, so they are checked against twice the sum.
func parseBounds(max, maxRead int) (rbufLen, rbufCap, msgCap int) {
	const frameHeader = 14
	// The partial-frame buffer is sized to its frame once the header is in, and grows only to
	// what one read adds; the message buffer never grows past the limit.
	return frameHeader + max - 1, frameHeader + max + maxRead, max
}

// FuzzParseBounded feeds arbitrary bytes in reads of a fuzzed size and checks, after every
// read, what the connection holds: never more than one frame within the limit, however long
// a length the bytes declare. (FuzzParse checks what is delivered.)
func FuzzParseBounded(f *testing.F) {
	for _, s := range append(fuzzSeeds(), abuseSeeds()...) {
		f.Add(s, uint8(7))
	}
	f.Fuzz(func(t *testing.T, data []byte, read uint8) {
		size := int(read) + 1
		rec := &recorder{}
		p := &poller{e: &Engine{cfg: Config{MaxMessageBytes: fuzzMax}, h: rec}}
		c := &Conn{p: p}
		rbufLen, rbufCap, msgCap := parseBounds(fuzzMax, size)
		for len(data) > 0 && !c.broken {
			n := min(size, len(data))
			p.feed(c, slices.Clone(data[:n]))
			data = data[n:]
			if len(c.partial()) > rbufLen || cap(c.partial()) > rbufCap || len(c.fragments()) > fuzzMax || cap(c.fragments()) > msgCap {
				t.Fatalf("holding rbuf %d (cap %d, bound %d/%d) and msg %d (cap %d, bound %d/%d)",
					len(c.partial()), cap(c.partial()), rbufLen, rbufCap, len(c.fragments()), cap(c.fragments()), fuzzMax, msgCap)
			}
		}
		if len(rec.bad) > 0 {
			t.Fatal(rec.bad)
		}
		if c.broken && (c.rbuf != nil || c.msg != nil) {
			t.Fatalf("a broken connection still holds rbuf %d and msg %d bytes", len(c.partial()), len(c.fragments()))
		}
	})
}

// nopHandler ignores everything except protocol errors, whose code it keeps.
type nopHandler struct{ code atomic.Int32 }

func (*nopHandler) OnMessage(*Conn, Opcode, []byte) {}
func (h *nopHandler) OnProtocolError(_ *Conn, code int, _ string) {
	h.code.Store(int32(code))
}
func (*nopHandler) OnWritable(*Conn) {}
func (*nopHandler) OnHangup(*Conn)   {}

// TestHugeDeclaredLengthAllocatesNoPayload checks that a header declaring more than the limit
// is refused with 1009 before anything is allocated for its payload, whatever it declares.
func TestHugeDeclaredLengthAllocatesNoPayload(t *testing.T) {
	const max = 64 << 10
	for _, n := range []uint64{max + 1, 1 << 20, 1 << 32, 1 << 62, math.MaxInt64, 1 << 63, math.MaxUint64} {
		for _, op := range []Opcode{OpText, OpBinary, OpContinuation} {
			frame := longFrame(op, true, n, pattern(100))
			if op == OpContinuation {
				frame = append(clientFrame(false, OpText, []byte("a"), testMask), frame...)
			}
			h := &nopHandler{}
			p := &poller{e: &Engine{cfg: Config{MaxMessageBytes: max}, h: h}}
			in := make([]byte, len(frame))
			var c *Conn
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			allocs := testing.AllocsPerRun(100, func() {
				c = &Conn{p: p}
				copy(in, frame)
				p.feed(c, in)
			})
			runtime.ReadMemStats(&after)
			perRun := float64(after.TotalAlloc-before.TotalAlloc) / 101
			if h.code.Load() != CloseTooBig || !c.broken || c.rbuf != nil || c.msg != nil {
				t.Errorf("declared %d (op %d): close %d, broken %v, holding rbuf %d msg %d; want 1009 and nothing held",
					n, op, h.code.Load(), c.broken, len(c.partial()), len(c.fragments()))
			}
			// The Conn itself, the error and, for a continuation, the first fragment.
			if allocs > 4 || perRun > 1024 {
				t.Errorf("declared %d (op %d): %.0f allocations, %.0f bytes per frame; want a few small ones", n, op, allocs, perRun)
			}
		}
	}
}

// fragments is what c holds of a fragmented message in progress (nil when none).
func (c *Conn) fragments() []byte {
	if c.msg == nil {
		return nil
	}
	return *c.msg
}

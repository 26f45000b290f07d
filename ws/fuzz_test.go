package ws

import (
	"fmt"
	"slices"
	"testing"
	"unicode/utf8"
)

// fuzzMax is the message limit of the fuzzed parser: small, so that 16-bit lengths and
// joined fragments can pass it.
const fuzzMax = 300

// recorder is a Handler that writes down what the parser delivers, for one connection.
type recorder struct {
	events []string
	bad    []string // broken invariants
}

func (r *recorder) OnMessage(c *Conn, op Opcode, p []byte) {
	switch {
	case op == OpText || op == OpBinary:
		if len(p) > fuzzMax {
			r.bad = append(r.bad, fmt.Sprintf("data message of %d bytes over the limit %d", len(p), fuzzMax))
		}
		if op == OpText && !utf8.Valid(p) {
			r.bad = append(r.bad, fmt.Sprintf("invalid UTF-8 text delivered: %q", p))
		}
	case op == OpClose || op == OpPing || op == OpPong:
		if len(p) > 125 {
			r.bad = append(r.bad, fmt.Sprintf("control frame of %d bytes delivered", len(p)))
		}
	default:
		r.bad = append(r.bad, fmt.Sprintf("opcode %#x delivered", op))
	}
	if c.broken {
		r.bad = append(r.bad, "message delivered after a protocol error")
	}
	r.events = append(r.events, fmt.Sprintf("msg %d %q", op, p))
}

func (r *recorder) OnProtocolError(c *Conn, code int, reason string) {
	switch code {
	case CloseProtocolError, CloseInvalidData, CloseTooBig:
	default:
		r.bad = append(r.bad, fmt.Sprintf("unexpected close code %d", code))
	}
	r.events = append(r.events, fmt.Sprintf("error %d %s", code, reason))
}

func (r *recorder) OnWritable(*Conn) { r.bad = append(r.bad, "OnWritable from the parser") }
func (r *recorder) OnHangup(*Conn)   { r.bad = append(r.bad, "OnHangup from the parser") }

// parseChunks feeds chunks to a fresh connection through the poller's feed path, as the read
// loop does (nothing after a protocol error), and returns what was delivered. Chunks are
// copied first: feed unmasks in place.
func parseChunks(chunks ...[]byte) (events, bad []string) {
	rec := &recorder{}
	p := &poller{e: &Engine{cfg: Config{MaxMessageBytes: fuzzMax}, h: rec}}
	c := &Conn{p: p}
	for _, ch := range chunks {
		if c.broken {
			break
		}
		p.feed(c, slices.Clone(ch))
	}
	return rec.events, rec.bad
}

func fuzzSeeds() [][]byte {
	m := testMask
	cat := func(fs ...[]byte) []byte { return slices.Concat(fs...) }
	return [][]byte{
		{},
		clientFrame(true, OpText, []byte("hello"), m),
		cat(clientFrame(true, OpText, []byte("a"), m), clientFrame(true, OpBinary, []byte{0, 1, 2}, m)),
		cat(clientFrame(false, OpText, []byte("hel"), m), clientFrame(true, OpPing, []byte("p"), m),
			clientFrame(false, OpContinuation, []byte("lo"), m), clientFrame(true, OpContinuation, []byte("!"), m)),
		clientFrame(true, OpText, pattern(200), m),
		clientFrame(true, OpBinary, pattern(300), m),
		clientFrame(true, OpBinary, pattern(301), m),
		cat(clientFrame(false, OpBinary, pattern(200), m), clientFrame(true, OpContinuation, pattern(101), m)),
		clientFrame(true, OpText, []byte{0xff, 0xfe}, m),
		cat(clientFrame(false, OpText, []byte{0xe2, 0x82}, m), clientFrame(true, OpContinuation, []byte{0xac}, m)),
		clientFrame(true, OpClose, []byte{0x03, 0xe8, 'b', 'y', 'e'}, m),
		clientFrame(true, OpContinuation, []byte("x"), m),
		cat(clientFrame(false, OpText, []byte("x"), m), clientFrame(true, OpText, []byte("y"), m)),
		clientFrame(false, OpPing, nil, m),
		{0x81, 0x02, 'h', 'i'},
		{0xC1, 0x80, 1, 2, 3, 4},
		{0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4},
		{0x8B, 0x80, 1, 2, 3, 4},
		cat(clientFrame(true, OpText, []byte("ok"), m), []byte{0x81, 0x85, 1, 2}),
	}
}

// FuzzParse checks the frame parser on arbitrary client bytes: no panic, no message over the
// limit, only valid UTF-8 text, and the same deliveries however the bytes are split into reads.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s, uint16(len(s)/2))
	}
	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		whole, bad := parseChunks(data)
		if len(bad) > 0 {
			t.Fatalf("fed at once: %v", bad)
		}
		check := func(how string, chunks ...[]byte) {
			got, bad := parseChunks(chunks...)
			if len(bad) > 0 {
				t.Fatalf("%s: %v", how, bad)
			}
			if !slices.Equal(got, whole) {
				t.Fatalf("%s delivered\n%q\nfed at once\n%q", how, got, whole)
			}
		}
		k := 0
		if len(data) > 0 {
			k = int(cut) % (len(data) + 1)
		}
		check(fmt.Sprintf("split at %d", k), data[:k], data[k:])
		// Every split point for short inputs, evenly spaced ones for long inputs (the cost of
		// one input must stay small or the fuzzer spends its time minimizing).
		step := 1
		if len(data) > 256 {
			step = len(data) / 32
		}
		for i := 0; i <= len(data); i += step {
			check(fmt.Sprintf("split at %d", i), data[:i], data[i:])
		}
		if len(data) <= 512 {
			one := make([][]byte, len(data))
			for i := range data {
				one[i] = data[i : i+1]
			}
			check("byte by byte", one...)
		}
	})
}

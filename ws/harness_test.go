package ws

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-rt/herald/internal/wstest"
)

// This file is a small owner for the engine tests: a real HTTP server that upgrades with
// CheckHandshake and Hijack, attaches to an Engine, and gives every connection one owner
// goroutine that does all of its writes, its Shutdown and its Close, as herald's workers do.

type evKind int

const (
	evMessage evKind = iota
	evProtocolError
	evWritable
	evHangup
)

func (k evKind) String() string {
	return [...]string{"message", "protocol error", "writable", "hang-up"}[k]
}

// event is one Handler call, recorded for the test.
type event struct {
	kind    evKind
	o       *owner
	op      Opcode
	payload []byte
	code    int
	reason  string
}

// flushResult is what one flush of the owner's queue did.
type flushResult struct {
	n       int
	blocked bool
	err     error
	queued  int // bytes still queued after the flush
}

type cmdKind int

const (
	cmdWrite cmdKind = iota
	cmdWriteShutdown
	cmdWritable
	cmdShutdown
	cmdHangup
)

type ownerCmd struct {
	kind  cmdKind
	bufs  [][]byte
	reply chan flushResult // cmdWrite: the result of the flush that follows
}

// owner is the one goroutine that writes to, shuts down and closes one connection.
type owner struct {
	c       *Conn
	cmds    chan ownerCmd
	done    chan struct{}
	flushed chan flushResult // flushes caused by OnWritable (never blocks the owner)
	hangups atomic.Int32
	written atomic.Int64
}

func newOwner() *owner {
	return &owner{cmds: make(chan ownerCmd, 1024), done: make(chan struct{}), flushed: make(chan flushResult, 4096)}
}

func (o *owner) run() {
	defer close(o.done)
	var queue [][]byte
	queued, blocked := 0, false
	flush := func() flushResult {
		if blocked || len(queue) == 0 {
			return flushResult{blocked: blocked, queued: queued}
		}
		n, b, err := o.c.Writev(queue)
		o.written.Add(int64(n))
		queued -= n
		for left := n; left > 0; {
			if left < len(queue[0]) {
				queue[0] = queue[0][left:]
				break
			}
			left -= len(queue[0])
			queue = queue[1:]
		}
		blocked = b
		return flushResult{n: n, blocked: b, err: err, queued: queued}
	}
	for m := range o.cmds {
		switch m.kind {
		case cmdWrite, cmdWriteShutdown:
			queue = append(queue, m.bufs...)
			for _, b := range m.bufs {
				queued += len(b)
			}
			r := flush()
			if m.reply != nil {
				m.reply <- r
			}
			if m.kind == cmdWriteShutdown {
				o.c.Shutdown()
			}
		case cmdWritable:
			blocked = false
			r := flush()
			select {
			case o.flushed <- r:
			default:
			}
		case cmdShutdown:
			o.c.Shutdown()
		case cmdHangup:
			if err := o.c.Close(); err != nil {
				panic(fmt.Sprintf("close: %v", err))
			}
			if err := o.c.Close(); err != nil { // idempotent
				panic(fmt.Sprintf("second close: %v", err))
			}
			return
		}
	}
}

// write queues bufs and returns what the flush right after did.
func (o *owner) write(bufs ...[]byte) flushResult {
	reply := make(chan flushResult, 1)
	o.cmds <- ownerCmd{kind: cmdWrite, bufs: bufs, reply: reply}
	return <-reply
}

// echo is the Handler: it records every call and answers data messages with the same
// message, pings with pongs, close frames with a close frame, and protocol errors with a
// close frame carrying the code, followed by Shutdown.
type echo struct {
	events  chan event
	dropped atomic.Int32
}

func (h *echo) record(e event) {
	select {
	case h.events <- e:
	default:
		h.dropped.Add(1)
	}
}

func (h *echo) OnMessage(c *Conn, op Opcode, p []byte) {
	o := c.Data.(*owner)
	cp := append([]byte(nil), p...)
	h.record(event{kind: evMessage, o: o, op: op, payload: cp})
	if ms, ok := strings.CutPrefix(string(cp), "hold:"); ok && op == OpText {
		if n, err := strconv.Atoi(ms); err == nil {
			c.Hold(time.Duration(n) * time.Millisecond)
		}
	}
	switch op {
	case OpText, OpBinary:
		o.cmds <- ownerCmd{kind: cmdWrite, bufs: [][]byte{AppendFrame(nil, op, cp)}}
	case OpPing:
		o.cmds <- ownerCmd{kind: cmdWrite, bufs: [][]byte{AppendFrame(nil, OpPong, cp)}}
	case OpClose:
		o.cmds <- ownerCmd{kind: cmdWriteShutdown, bufs: [][]byte{CloseFrame(CloseNormal, "")}}
	}
}

func (h *echo) OnProtocolError(c *Conn, code int, reason string) {
	o := c.Data.(*owner)
	h.record(event{kind: evProtocolError, o: o, code: code, reason: reason})
	o.cmds <- ownerCmd{kind: cmdWriteShutdown, bufs: [][]byte{CloseFrame(code, reason)}}
}

func (h *echo) OnWritable(c *Conn) {
	o := c.Data.(*owner)
	h.record(event{kind: evWritable, o: o})
	o.cmds <- ownerCmd{kind: cmdWritable}
}

func (h *echo) OnHangup(c *Conn) {
	o := c.Data.(*owner)
	o.hangups.Add(1)
	h.record(event{kind: evHangup, o: o})
	o.cmds <- ownerCmd{kind: cmdHangup}
}

var _ Handler = (*echo)(nil)

// harness is an Engine behind a real HTTP server on 127.0.0.1.
type harness struct {
	t        *testing.T
	e        *Engine
	h        *echo
	srv      *httptest.Server
	addr     string
	attached chan *owner
	preLen   chan int

	mu      sync.Mutex
	owners  []*owner
	clients []*wstest.Client
}

// waitFor is how long a test waits for anything that normally takes milliseconds: an event, a
// frame, an attachment, a hang-up. Tests run on busy machines (two cores shared with other
// builds, -race), so it is generous; a passing test never waits it out.
const waitFor = 30 * time.Second

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	if cfg.Pollers == 0 {
		cfg.Pollers = 2
	}
	hs := &harness{t: t, h: &echo{events: make(chan event, 8192)}, attached: make(chan *owner, 64), preLen: make(chan int, 64)}
	e, err := NewEngine(cfg, hs.h)
	if err != nil {
		t.Fatal(err)
	}
	hs.e = e
	hs.srv = httptest.NewServer(http.HandlerFunc(hs.serve))
	hs.addr = strings.TrimPrefix(hs.srv.URL, "http://")
	t.Cleanup(hs.cleanup)
	return hs
}

func (hs *harness) serve(w http.ResponseWriter, r *http.Request) {
	accept, err := CheckHandshake(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	nc, pre, err := Hijack(w, accept, nil, waitFor)
	if err != nil {
		hs.t.Errorf("hijack: %v", err)
		return
	}
	select {
	case hs.preLen <- len(pre):
	default:
	}
	o := newOwner()
	_, err = hs.e.Attach(nc, pre, func(c *Conn) {
		o.c = c
		c.Data = o
		hs.mu.Lock()
		hs.owners = append(hs.owners, o)
		hs.mu.Unlock()
		go o.run()
	})
	if err != nil {
		hs.t.Errorf("attach: %v", err)
		return
	}
	hs.attached <- o
}

// dial connects a client and returns it with the owner of its server side.
func (hs *harness) dial() (*wstest.Client, *owner) {
	hs.t.Helper()
	cl, err := wstest.Dial(hs.addr, "/")
	if err != nil {
		hs.t.Fatal(err)
	}
	hs.track(cl)
	return cl, hs.owner()
}

func (hs *harness) track(cl *wstest.Client) {
	hs.mu.Lock()
	hs.clients = append(hs.clients, cl)
	hs.mu.Unlock()
}

func (hs *harness) owner() *owner {
	hs.t.Helper()
	select {
	case o := <-hs.attached:
		return o
	case <-time.After(waitFor):
		hs.t.Fatalf("waited %v for a connection to attach; none did", waitFor)
		return nil
	}
}

// next returns the next event of kind for o, skipping others (spurious writable edges,
// events of other connections).
func (hs *harness) next(o *owner, kind evKind) event {
	hs.t.Helper()
	deadline := time.After(waitFor)
	var seen []string
	for {
		select {
		case e := <-hs.h.events:
			if e.o == o && e.kind == kind {
				return e
			}
			seen = append(seen, e.kind.String())
		case <-deadline:
			hs.t.Fatalf("waited %v for a %s event; saw only %v", waitFor, kind, seen)
			return event{}
		}
	}
}

// cleanup closes the clients, waits for every owner to see its hang-up and close its
// connection, then stops the engine and checks that each connection hung up exactly once.
func (hs *harness) cleanup() {
	t := hs.t
	hs.mu.Lock()
	clients, owners := hs.clients, hs.owners
	hs.mu.Unlock()
	for _, cl := range clients {
		cl.Close()
	}
	deadline := time.After(waitFor)
	for i, o := range owners {
		select {
		case <-o.done:
		case <-deadline:
			t.Errorf("waited %v for every connection to hang up; connection %d of %d did not", waitFor, i, len(owners))
			return
		}
	}
	hs.e.Close()
	hs.srv.Close()
	for i, o := range owners {
		if n := o.hangups.Load(); n != 1 {
			t.Errorf("connection %d: %d hang-ups, want exactly 1", i, n)
		}
	}
	if n := hs.h.dropped.Load(); n > 0 {
		t.Errorf("%d events dropped: the test did not read them", n)
	}
}

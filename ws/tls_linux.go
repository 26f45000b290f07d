//go:build linux && !heraldportable

package ws

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"syscall"
	"unsafe"
)

// tlsConn is a TLS connection of the epoll engine: the Conn its owner and handler see, first,
// so that a *Conn of a TLS poller is a *tlsConn, and the TLS state behind it.
type tlsConn struct {
	Conn
	tc *tls.Conn
	h  *handoffConn
}

// asTLS returns the tlsConn c is the first field of. Only for a connection of a TLS poller.
func asTLS(c *Conn) *tlsConn { return (*tlsConn)(unsafe.Pointer(c)) }

// tlsRecord is the most plaintext one record carries (TLS's limit): Writev seals its frames
// into records this large, each written with one write call.
const tlsRecord = 16 << 10

// recordBufs holds the buffers Writev gathers a record's plaintext in.
var recordBufs = sync.Pool{New: func() any { b := make([]byte, 0, tlsRecord); return &b }}

// tlsPollers returns the engine's TLS pollers, starting them on the first TLS connection.
func (e *Engine) tlsPollersStarted() ([]*poller, error) {
	e.tlsMu.Lock()
	defer e.tlsMu.Unlock()
	if e.tlsPollers != nil {
		return e.tlsPollers, nil
	}
	if e.closing.Load() {
		return nil, errors.New("ws: engine closed")
	}
	var ps []*poller
	for i := 0; i < len(e.pollers); i++ {
		p, err := newPoller(e)
		if err != nil {
			for _, q := range ps {
				syscall.Close(q.epfd)
				syscall.Close(q.wakefd)
			}
			return nil, err
		}
		p.tls, p.plain = true, make([]byte, e.cfg.ReadBufferBytes)
		ps = append(ps, p)
	}
	for _, p := range ps {
		e.wg.Add(1)
		go p.run()
	}
	e.tlsPollers = ps
	return ps, nil
}

// attachTLS is Attach for a TLS connection whose transport is h.
func (e *Engine) attachTLS(tc *tls.Conn, h *handoffConn, pre []byte, bind func(*Conn)) (*Conn, error) {
	ps, err := e.tlsPollersStarted()
	if err != nil {
		h.Conn.Close()
		return nil, err
	}
	fd, err := e.takeFD(h.Conn)
	if err != nil {
		return nil, err
	}
	h.engage(fd)
	p := ps[int(e.next.Add(1))%len(ps)]
	t := &tlsConn{Conn: Conn{fd: fd, p: p}, tc: tc, h: h}
	c := &t.Conn
	bind(c)
	if len(pre) > 0 {
		p.feed(c, pre)
	}
	// Records crypto/tls read ahead of the upgrade request are decrypted now: no edge of
	// the socket will announce them.
	if !c.broken {
		buf := make([]byte, tlsRecord)
		if !drainTLS(p, c, t, buf) {
			c.broken = true
		}
	}
	releaseHandshakeBuffers(tc)
	return c, e.register(c, p)
}

// tlsBuffers are the fields of tls.Conn that hold its input (crypto/tls, Go 1.26).
var tlsBuffers = func() (idx [3]int) {
	typ := reflect.TypeFor[tls.Conn]()
	for i, f := range []struct {
		name string
		typ  reflect.Type
	}{{"rawInput", reflect.TypeFor[bytes.Buffer]()}, {"input", reflect.TypeFor[bytes.Reader]()}, {"hand", reflect.TypeFor[bytes.Buffer]()}} {
		sf, ok := typ.FieldByName(f.name)
		if !ok || sf.Type != f.typ || len(sf.Index) != 1 {
			return [3]int{-1}
		}
		idx[i] = sf.Index[0]
	}
	return idx
}()

// releaseHandshakeBuffers lets go of what crypto/tls keeps of the handshake and the upgrade
// request once both are read: its input buffers, empty by then, keep the capacity the
// ClientHello gave them (with a post-quantum key share, about 4 KiB of heap per connection,
// measured: docs/benchmarks.md), for the life of an idle connection. An empty buffer and a
// zero one are the same to crypto/tls, which grows them again when a large record comes. It
// reaches crypto/tls's unexported fields: when a Go release renames or retypes them it does
// nothing, and TestTLSReleasesHandshakeBuffers says so. It reports whether it released them.
// Call it while nothing else uses tc.
func releaseHandshakeBuffers(tc *tls.Conn) bool {
	if tlsBuffers[0] < 0 {
		return false
	}
	v := reflect.ValueOf(tc).Elem()
	raw := (*bytes.Buffer)(unsafe.Pointer(v.Field(tlsBuffers[0]).UnsafeAddr()))
	input := (*bytes.Reader)(unsafe.Pointer(v.Field(tlsBuffers[1]).UnsafeAddr()))
	hand := (*bytes.Buffer)(unsafe.Pointer(v.Field(tlsBuffers[2]).UnsafeAddr()))
	if raw.Len() != 0 || input.Len() != 0 || hand.Len() != 0 {
		return false // a record or a message in progress: keep them
	}
	*raw, *input, *hand = bytes.Buffer{}, bytes.Reader{}, bytes.Buffer{}
	return true
}

// feedTLS hands data, ciphertext the poller read, to the connection's TLS layer and feeds
// what it decrypts to the parser. It reports false when the TLS layer failed (a bad record,
// an alert): the connection is to be hung up.
func (p *poller) feedTLS(c *Conn, data []byte) bool {
	t := asTLS(c)
	t.h.in = data
	ok := drainTLS(p, c, t, p.plain)
	t.h.in = nil
	return ok
}

// drainTLS reads what the TLS layer can decrypt from what it holds.
func drainTLS(p *poller, c *Conn, t *tlsConn, buf []byte) bool {
	for !c.broken && !c.gone {
		n, err := t.tc.Read(buf)
		if n > 0 {
			p.feed(c, buf[:n])
		}
		if err != nil {
			return err == errWouldBlock
		}
	}
	return true
}

// flushTLS writes what a TLS connection kept back of its last record, on a writable edge: the
// owner was told that every byte it gave was taken, so it has nothing to retry and it is the
// poller's to finish the record. It reports true (and arms c again) when some is still kept;
// an error is left for the owner's next Writev, and the hang-up follows.
func (p *poller) flushTLS(c *Conn) bool {
	if blocked, err := asTLS(c).h.flush(); blocked && err == nil {
		c.armed.Store(true)
		return true
	}
	return false
}

// writev is Writev for a TLS connection: what the kernel did not take of the last record is
// written first; then bufs are sealed into records, each written as far as the kernel takes
// it, until one is kept back. At most one record's ciphertext is kept back per connection.
func (t *tlsConn) writev(bufs [][]byte) (n int, blocked bool, err error) {
	c := &t.Conn
	// Arm before writing so that a writable edge between EAGAIN and arming cannot be lost.
	c.armed.Store(true)
	if blocked, err := t.h.flush(); err != nil || blocked {
		// Armed again after the write that filled the kernel: a writable edge the poller took
		// meanwhile (it found nothing kept, and disarmed) must not leave this one unreported.
		c.armed.Store(err == nil)
		return 0, blocked, err
	}
	bp := recordBufs.Get().(*[]byte)
	defer recordBufs.Put(bp)
	rec := (*bp)[:0]
	seal := func() error {
		if len(rec) == 0 {
			return nil
		}
		k, err := t.tc.Write(rec)
		n += k
		rec = rec[:0]
		return err
	}
	for _, b := range bufs {
		for len(b) > 0 {
			take := min(len(b), tlsRecord-len(rec))
			rec, b = append(rec, b[:take]...), b[take:]
			if len(rec) < tlsRecord {
				continue
			}
			if err := seal(); err != nil {
				c.armed.Store(false)
				return n, false, err
			}
			if t.h.kept() {
				c.armed.Store(true) // as above
				return n, true, nil
			}
		}
	}
	if err := seal(); err != nil {
		c.armed.Store(false)
		return n, false, err
	}
	if t.h.kept() {
		c.armed.Store(true) // as above
		return n, true, nil
	}
	c.armed.Store(false)
	return n, false, nil
}

// takeFD duplicates nc's descriptor into the engine (non-blocking, with the configured send
// buffer) and closes nc.
func (e *Engine) takeFD(nc interface{ Close() error }) (int, error) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		nc.Close()
		return -1, errors.New("ws: connection has no descriptor")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		nc.Close()
		return -1, fmt.Errorf("ws: raw conn: %w", err)
	}
	fd := -1
	var dupErr error
	if err := raw.Control(func(s uintptr) { fd, dupErr = dupCloexec(int(s)) }); err != nil {
		dupErr = err
	}
	nc.Close()
	if dupErr != nil {
		return -1, fmt.Errorf("ws: dup: %w", dupErr)
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return -1, fmt.Errorf("ws: nonblock: %w", err)
	}
	if fd >= len(e.table) {
		syscall.Close(fd)
		return -1, fmt.Errorf("ws: descriptor %d over the table size %d", fd, len(e.table))
	}
	if e.cfg.SendBufferBytes > 0 {
		if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_SNDBUF, e.cfg.SendBufferBytes); err != nil {
			syscall.Close(fd)
			return -1, fmt.Errorf("ws: send buffer: %w", err)
		}
	}
	return fd, nil
}

// writeNow writes b to the non-blocking descriptor fd as far as the kernel takes it.
func writeNow(fd int, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := syscall.Write(fd, b[n:])
		if k > 0 {
			n += k
		}
		switch {
		case err == nil:
		case err == syscall.EINTR:
		case err == syscall.EAGAIN:
			return n, nil
		default:
			return n, err
		}
	}
	return n, nil
}

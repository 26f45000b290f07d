//go:build linux && !heraldportable

package ws

import (
	"errors"
	"net/netip"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// Conn is one WebSocket connection after its handshake. Reading state belongs to the
// connection's poller; Writev, Shutdown and Close belong to one owner goroutine at a time
// (herald's fan-out worker).
type Conn struct {
	fd     int
	p      *poller
	armed  atomic.Bool // a Writev would have blocked: report the next writable edge
	closed atomic.Bool

	// Poller-owned read state. rbuf and msg are nil or point at bytes held: behind pointers,
	// since most reads end on a frame's end, clients seldom fragment, and every idle
	// connection pays for the words (see TestConnSize).
	rbuf   *[]byte // unparsed bytes: of a frame that has not fully arrived, or those a hold kept
	msg    *[]byte // fragments of a message in progress (set while msgOp is)
	msgOp  Opcode
	broken bool      // a protocol error was reported: input is discarded
	gone   bool      // hang-up reported
	turn   readState // where it stands in its poller's turns (more or held list)
	// since is when the frame (or fragmented message) in progress began, in engine
	// milliseconds plus one; 0 when none is. It fits the struct's padding.
	since uint32

	// Data is the owner's per-connection state, set before the connection is attached.
	Data any
}

// ErrClosed is returned by writes on a closed connection.
var ErrClosed = errors.New("ws: connection closed")

// maxIOV is how many buffers one writev call takes here: enough to coalesce a burst, small
// enough for the iovec array to live on the stack (0 allocations, measured).
const maxIOV = 64

// Writev writes bufs with as few writev calls as possible and never blocks. It does not
// modify bufs. It returns how many bytes went out; blocked is true when the kernel buffer
// filled first, in which case the handler's OnWritable is called once the socket drains.
func (c *Conn) Writev(bufs [][]byte) (n int, blocked bool, err error) {
	if c.closed.Load() {
		return 0, false, ErrClosed
	}
	if c.p.tls {
		return asTLS(c).writev(bufs)
	}
	// Arm before writing so that a writable edge between EAGAIN and arming cannot be lost.
	c.armed.Store(true)
	idx, off := 0, 0 // the first unwritten byte is bufs[idx][off]
	for idx < len(bufs) {
		var iov [maxIOV]syscall.Iovec
		k, want := 0, 0
		for i := idx; i < len(bufs) && k < maxIOV; i++ {
			b := bufs[i]
			if i == idx {
				b = b[off:]
			}
			if len(b) == 0 {
				continue
			}
			iov[k].Base = &b[0]
			iov[k].SetLen(len(b))
			want += len(b)
			k++
		}
		if k == 0 {
			break
		}
		var r uintptr
		var e syscall.Errno
		if k == 1 { // write(2) costs the kernel less than writev(2) of one buffer
			r, _, e = syscall.Syscall(syscall.SYS_WRITE, uintptr(c.fd), uintptr(unsafe.Pointer(iov[0].Base)), uintptr(want))
		} else {
			r, _, e = syscall.Syscall(syscall.SYS_WRITEV, uintptr(c.fd), uintptr(unsafe.Pointer(&iov[0])), uintptr(k))
		}
		if e != 0 {
			if e == syscall.EINTR {
				continue
			}
			if e == syscall.EAGAIN {
				return n, true, nil
			}
			c.armed.Store(false)
			return n, false, e
		}
		n += int(r)
		// Step past r bytes.
		left := int(r)
		for idx < len(bufs) && left >= len(bufs[idx])-off {
			left -= len(bufs[idx]) - off
			idx, off = idx+1, 0
		}
		off += left
	}
	c.armed.Store(false)
	return n, false, nil
}

// MakeRoom lets the kernel accept n more bytes now however much unread data the peer has
// left in the send buffer: it raises the socket's send buffer (SO_SNDBUF) just past what is
// queued. A connection being cut off uses it so that its close frame goes straight behind
// the bytes already in the kernel instead of waiting for a peer that reads slowly or not at
// all. It fails when the kernel will not raise the buffer that far (net.core.wmem_max).
func (c *Conn) MakeRoom(n int) error {
	if c.closed.Load() {
		return ErrClosed
	}
	var mem [skMeminfoVars]uint32
	size := uint32(unsafe.Sizeof(mem))
	_, _, e := syscall.Syscall6(syscall.SYS_GETSOCKOPT, uintptr(c.fd), syscall.SOL_SOCKET, soMeminfo,
		uintptr(unsafe.Pointer(&mem[0])), uintptr(unsafe.Pointer(&size)), 0)
	if e != 0 {
		return e
	}
	// The kernel takes a write while the memory it accounts for queued segments
	// (truesize, headers included) is under the buffer size, which it sets to twice the
	// value given. Leave room for n bytes at twice their size, and a segment's overhead.
	want := int(mem[skMeminfoWmemQueued]) + 2*n + 4096
	if want <= int(mem[skMeminfoSndbuf]) {
		return nil
	}
	if err := syscall.SetsockoptInt(c.fd, syscall.SOL_SOCKET, syscall.SO_SNDBUF, (want+1)/2); err != nil {
		return err
	}
	got, err := syscall.GetsockoptInt(c.fd, syscall.SOL_SOCKET, syscall.SO_SNDBUF)
	if err != nil {
		return err
	}
	if got < want {
		return errNoRoom
	}
	return nil
}

// SO_MEMINFO (Linux 3.x+): the socket's memory counters as an array of uint32.
const (
	soMeminfo           = 55
	skMeminfoSndbuf     = 3
	skMeminfoWmemQueued = 5
	skMeminfoVars       = 9
)

var errNoRoom = errors.New("ws: the kernel would not raise the send buffer (net.core.wmem_max)")

// Shutdown ends the connection in both directions; bytes already accepted by the kernel
// still go out first. The poller reports the hang-up afterwards.
func (c *Conn) Shutdown() {
	if !c.closed.Load() {
		_ = syscall.Shutdown(c.fd, syscall.SHUT_RDWR)
	}
}

// Close releases the socket. Call it once, after OnHangup, when nothing writes any more.
func (c *Conn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	return syscall.Close(c.fd)
}

// Backlog returns the bytes the kernel holds for this socket: unread, received but not yet
// read by the poller (SIOCINQ, which is TIOCINQ), and unsent, written but not yet acknowledged by the peer
// (SIOCOUTQ, which is TIOCOUTQ). The fan-out engine asks before closing a connection that missed its pong: a
// client whose answer is in the kernel is alive.
func (c *Conn) Backlog() (unread, unsent int, err error) {
	if c.closed.Load() {
		return 0, 0, ErrClosed
	}
	var in, out int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(c.fd), syscall.TIOCINQ, uintptr(unsafe.Pointer(&in))); e != 0 {
		return 0, 0, e
	}
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(c.fd), syscall.TIOCOUTQ, uintptr(unsafe.Pointer(&out))); e != 0 {
		return 0, 0, e
	}
	return int(in), int(out), nil
}

// PeerAddr is the address of the connection's client (the zero Addr when the socket cannot
// tell). Call it from the connection's reader, which the socket outlives.
func (c *Conn) PeerAddr() netip.Addr {
	sa, err := syscall.Getpeername(c.fd)
	if err != nil {
		return netip.Addr{}
	}
	switch a := sa.(type) {
	case *syscall.SockaddrInet4:
		return netip.AddrFrom4(a.Addr)
	case *syscall.SockaddrInet6:
		return netip.AddrFrom16(a.Addr).Unmap()
	}
	return netip.Addr{}
}

// held reports whether a hold keeps c unread (Hold).
func (c *Conn) held() bool { return c.turn == readHeld }

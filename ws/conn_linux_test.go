//go:build linux && !heraldportable

package ws

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// bareConn returns a Conn on one end of a loopback TCP pair, non-blocking and attached to no
// poller (nothing reads it), and the other end; both are closed when the test ends.
func bareConn(t *testing.T) (*Conn, net.Conn) {
	t.Helper()
	server, client := tcpPair(t)
	t.Cleanup(func() { client.Close() })
	raw, err := server.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	fd := -1
	raw.Control(func(s uintptr) { fd, err = dupCloexec(int(s)) })
	server.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	c := &Conn{fd: fd, p: &poller{}}
	t.Cleanup(func() { c.Close() })
	return c, client
}

// TestWritevAllocs pins the write path at zero allocations: it runs once per flush of every
// connection.
func TestWritevAllocs(t *testing.T) {
	c, client := bareConn(t)

	bufs := [][]byte{[]byte("frame one|"), []byte("frame two, longer|"), []byte("three|")}
	per := 0
	for _, b := range bufs {
		per += len(b)
	}
	runs := 0
	allocs := testing.AllocsPerRun(200, func() {
		n, blocked, err := c.Writev(bufs)
		if n != per || blocked || err != nil {
			panic(fmt.Sprintf("Writev = %d, %v, %v", n, blocked, err))
		}
		runs++
	})
	if allocs != 0 {
		t.Errorf("Writev of 3 buffers: %v allocations, want 0", allocs)
	}
	want := bytes.Repeat(bytes.Join(bufs, nil), runs)
	got := make([]byte, len(want))
	client.SetReadDeadline(time.Now().Add(waitFor))
	if _, err := io.ReadFull(client, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the bytes received differ from the bytes written")
	}
}

// TestWritevManyBuffers writes more buffers than one writev takes and buffers that are empty.
func TestWritevManyBuffers(t *testing.T) {
	c, client := bareConn(t)
	var bufs [][]byte
	var want []byte
	for i := 0; i < 3*maxIOV+5; i++ {
		b := []byte(fmt.Sprintf("<%d>", i))
		if i%7 == 0 {
			b = nil
		}
		bufs = append(bufs, b)
		want = append(want, b...)
	}
	n, blocked, err := c.Writev(bufs)
	if n != len(want) || blocked || err != nil {
		t.Fatalf("Writev = %d, %v, %v; want %d", n, blocked, err, len(want))
	}
	got := make([]byte, len(want))
	client.SetReadDeadline(time.Now().Add(waitFor))
	if _, err := io.ReadFull(client, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

// TestConnSizeUnchanged pins the connection struct at 96 bytes (an allocator size class):
// the frame timeout's state lives in what was padding (docs/architecture.md rule 9).
func TestConnSizeUnchanged(t *testing.T) {
	if n := unsafe.Sizeof(Conn{}); n > 96 {
		t.Fatalf("ws.Conn is %d bytes; want at most 96", n)
	}
}

// TestBacklog: Backlog reports the bytes the peer sent that nobody read yet, and the bytes
// written that the peer's kernel has not taken (its receive buffer full).
func TestBacklog(t *testing.T) {
	c, client := bareConn(t)

	if in, out, err := c.Backlog(); in != 0 || out != 0 || err != nil {
		t.Fatalf("Backlog of a quiet socket = %d, %d, %v; want 0, 0, nil", in, out, err)
	}
	if _, err := client.Write([]byte("a pong, unread")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitFor)
	for in, _, _ := c.Backlog(); in != len("a pong, unread"); in, _, _ = c.Backlog() {
		if time.Now().After(deadline) {
			t.Fatalf("Backlog reports %d bytes unread; want %d", in, len("a pong, unread"))
		}
		time.Sleep(time.Millisecond)
	}
	// Fill the peer, which does not read, until the kernel refuses more.
	chunk := [][]byte{bytes.Repeat([]byte("x"), 64<<10)}
	for {
		_, blocked, err := c.Writev(chunk)
		if err != nil {
			t.Fatal(err)
		}
		if blocked {
			break
		}
	}
	if _, out, err := c.Backlog(); out <= 0 || err != nil {
		t.Fatalf("Backlog of a socket its peer does not read = %d unsent, %v; want some", out, err)
	}
	c.Close()
	if _, _, err := c.Backlog(); err != ErrClosed {
		t.Fatalf("Backlog after Close: %v; want ErrClosed", err)
	}
}

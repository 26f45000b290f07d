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

// TestWritevAllocs pins the write path at zero allocations: it runs once per flush of every
// connection.
func TestWritevAllocs(t *testing.T) {
	server, client := tcpPair(t)
	defer client.Close()
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
	defer c.Close()

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
	server, client := tcpPair(t)
	defer client.Close()
	raw, _ := server.(*net.TCPConn).SyscallConn()
	fd := -1
	var err error
	raw.Control(func(s uintptr) { fd, err = dupCloexec(int(s)) })
	server.Close()
	if err != nil {
		t.Fatal(err)
	}
	syscall.SetNonblock(fd, true)
	c := &Conn{fd: fd, p: &poller{}}
	defer c.Close()
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

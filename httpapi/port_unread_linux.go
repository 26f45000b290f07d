//go:build linux

package httpapi

import (
	"net"
	"syscall"
	"unsafe"
)

// unread returns how many bytes the kernel holds that the client sent and nc has not yet
// read (SIOCINQ, which is TIOCINQ); 0 when it cannot tell.
func unread(nc net.Conn) int {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return 0
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	var n int32
	_ = rc.Control(func(fd uintptr) {
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n))); e != 0 {
			n = 0
		}
	})
	return int(n)
}

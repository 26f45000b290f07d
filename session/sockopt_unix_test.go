//go:build unix

package session_test

import "syscall"

// setsockoptInt sets an integer socket option on a raw descriptor.
func setsockoptInt(fd uintptr, level, opt, value int) error {
	return syscall.SetsockoptInt(int(fd), level, opt, value)
}

// setMSS sets the TCP maximum segment size.
func setMSS(fd uintptr, n int) error {
	return syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG, n)
}

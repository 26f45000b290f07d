package session_test

import "syscall"

// setsockoptInt sets an integer socket option on a raw socket handle.
func setsockoptInt(fd uintptr, level, opt, value int) error {
	return syscall.SetsockoptInt(syscall.Handle(fd), level, opt, value)
}

// setMSS does nothing: Windows sockets have no TCP_MAXSEG option to set.
func setMSS(uintptr, int) error { return nil }

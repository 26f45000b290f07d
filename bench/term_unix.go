//go:build unix

package bench

import (
	"os"
	"syscall"
	"unsafe"
)

// TerminalWidth reports whether f is a terminal and, if so, its width in columns (0 when the
// terminal does not say).
func TerminalWidth(f *os.File) (cols int, ok bool) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, false
	}
	var ws struct{ row, col, xpixel, ypixel uint16 }
	var errno syscall.Errno
	err = rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCGWINSZ, uintptr(unsafe.Pointer(&ws)))
	})
	if err != nil || errno != 0 {
		return 0, false
	}
	return int(ws.col), true
}

//go:build unix

package main

import "syscall"

// setOpenFileLimit sets the process's open-file limit, soft and hard.
func setOpenFileLimit(n uint64) error {
	lim := syscall.Rlimit{Cur: n, Max: n}
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
}

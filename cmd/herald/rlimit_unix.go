//go:build unix

package main

import "syscall"

// openFileLimit is the process's open-file limit (its soft limit), or 1<<20 when it cannot
// be read or is unlimited.
func openFileLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil && rl.Cur < 1<<31 {
		return int(rl.Cur)
	}
	return 1 << 20
}

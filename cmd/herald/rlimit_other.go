//go:build !unix

package main

// openFileLimit is 1<<20 where the system has no open-file limit to read (Windows).
func openFileLimit() int {
	return 1 << 20
}

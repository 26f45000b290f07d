//go:build !unix

package bench

import "os"

// TerminalWidth reports that f is not a terminal: the progress line then prints plainly.
func TerminalWidth(_ *os.File) (cols int, ok bool) {
	return 0, false
}

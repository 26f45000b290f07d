//go:build !unix

package main

import "errors"

// setOpenFileLimit fails: the system has no open-file limit to lower.
func setOpenFileLimit(uint64) error {
	return errors.New("no open-file limit on this system")
}

//go:build !linux

package servicetest

import "os/exec"

func orphanProof(*exec.Cmd) {}

// asUser does nothing here: the servers that refuse root run on Linux in this suite.
func asUser(*exec.Cmd, string) (uid, gid int) { return -1, -1 }

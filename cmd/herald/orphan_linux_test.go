package main

import (
	"os/exec"
	"syscall"
)

// orphanProof makes the kernel kill the child if the test process dies without cleaning up
// (a -timeout panic), so no node outlives its test.
func orphanProof(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

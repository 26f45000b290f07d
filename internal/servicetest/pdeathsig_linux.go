package servicetest

import (
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
)

// orphanProof makes the kernel kill the child if the test process dies without cleaning
// up (a -timeout panic), so no server outlives its test.
func orphanProof(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// asUser makes cmd run as the system user name (uid and gid), for a server that refuses to
// run as root (postgres); it returns the uid and gid, or -1 when name is unknown.
func asUser(cmd *exec.Cmd, name string) (uid, gid int) {
	u, err := user.Lookup(name)
	if err != nil {
		return -1, -1
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	return uid, gid
}

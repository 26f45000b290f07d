package bench

import (
	"context"
	"syscall"
)

// bindAddressNoPort sets IP_BIND_ADDRESS_NO_PORT on a client socket before it binds.
func bindAddressNoPort(_ context.Context, _, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, ipBindAddressNoPort, 1)
	})
	if err != nil {
		return err
	}
	return serr
}

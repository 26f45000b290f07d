//go:build !linux

package bench

import (
	"context"
	"syscall"
)

// bindAddressNoPort does nothing: IP_BIND_ADDRESS_NO_PORT is Linux's.
func bindAddressNoPort(_ context.Context, _, _ string, _ syscall.RawConn) error {
	return nil
}

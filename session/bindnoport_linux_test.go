package session_test

import "syscall"

// ipBindAddressNoPort is IP_BIND_ADDRESS_NO_PORT (linux/in.h): bind the source address but
// choose the port at connect time, per destination, so that a fixed source address does not
// limit the connections to one ephemeral port range in all.
const ipBindAddressNoPort = 24

// bindNoPort sets IP_BIND_ADDRESS_NO_PORT on a socket about to bind.
func bindNoPort(fd uintptr) error {
	return setsockoptInt(fd, syscall.IPPROTO_IP, ipBindAddressNoPort, 1)
}

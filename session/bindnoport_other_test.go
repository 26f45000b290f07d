//go:build !linux

package session_test

// bindNoPort does nothing: IP_BIND_ADDRESS_NO_PORT is Linux's, and elsewhere a few thousand
// connections per source address are enough.
func bindNoPort(uintptr) error { return nil }

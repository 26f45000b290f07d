package appstore

import (
	"net"
	"strings"
)

// LocalHost reports whether a database host is this machine: a Unix socket's directory (an
// absolute path), localhost, or a loopback address. A connection to any other host crosses a
// network, where it should be encrypted.
func LocalHost(host string) bool {
	if strings.HasPrefix(host, "/") || strings.HasPrefix(host, "@") || strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

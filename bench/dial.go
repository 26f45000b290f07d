package bench

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/herald-rt/herald/ws"
)

// loopbackSources is how many loopback addresses (127.0.0.1 to 127.0.0.N) clients of a
// loopback target connect from. Linux gives connect() the even ephemeral ports first and scans
// all of them, one lookup each, before trying an odd one; with one source address, beyond about
// 14,000 connections to the same server port every connect scans that whole half of the range,
// and at 19,000 the generator spends seconds of kernel CPU in it, on the cores it shares with
// the server. Each source address brings a fresh set of 4-tuples.
const loopbackSources = 8

// MaxSources is the most loopback source addresses Target.Sources may name: 127.0.0.1 to
// 127.255.255.254.
const MaxSources = 1<<24 - 2

// sourceAddr is the loopback source address of client i among n: the (i mod n)-th after
// 127.0.0.0; n of 0 means loopbackSources.
func sourceAddr(i, n int) net.IP {
	if n <= 0 {
		n = loopbackSources
	}
	v := i%n + 1
	return net.IPv4(127, byte(v>>16), byte(v>>8), byte(v))
}

// ipBindAddressNoPort is Linux's IP_BIND_ADDRESS_NO_PORT: bind() takes the source address but
// leaves the port to connect(), which can then share ports across destinations.
const ipBindAddressNoPort = 24

// dialer returns the dialer of client i.
func (ep endpoint) dialer(i int, deadline time.Time) *net.Dialer {
	d := &net.Dialer{Deadline: deadline}
	if ep.loopback {
		d.LocalAddr = &net.TCPAddr{IP: sourceAddr(i, ep.sources)}
		d.ControlContext = bindAddressNoPort
	}
	return d
}

// dial connects client i to ep before deadline: a TCP connection, and over wss:// its TLS
// handshake, as the client end the engine takes over (ws.TLSClient).
func (ep endpoint) dial(ctx context.Context, i int, deadline time.Time) (net.Conn, error) {
	nc, err := ep.dialer(i, deadline).DialContext(ctx, "tcp", ep.addr)
	if err != nil || ep.tls == nil {
		return nc, err
	}
	tc := ws.TLSClient(nc, ep.tls)
	_ = nc.SetDeadline(deadline)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("tls: %w", err)
	}
	return tc, nil
}

// tcpOf returns the TCP connection under nc (a TLS connection's).
func tcpOf(nc net.Conn) (*net.TCPConn, bool) {
	for range 3 {
		switch c := nc.(type) {
		case *net.TCPConn:
			return c, true
		case interface{ NetConn() net.Conn }:
			nc = c.NetConn()
		default:
			return nil, false
		}
	}
	return nil, false
}

// isLoopbackV4 reports whether addr (host:port) names an IPv4 loopback address.
func isLoopbackV4(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.To4() != nil && ip.IsLoopback()
}

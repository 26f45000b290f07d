package postgres

import (
	"net"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/herald-rt/herald/appstore"
)

// Unencrypted returns the servers of url (host:port) off this machine that a connection may
// reach without TLS: with sslmode disable, allow, or prefer (pgx's default, without sslmode),
// which goes on in plaintext when the server offers no TLS, or when someone between the two
// says so. sslmode require, verify-ca and verify-full never do. The environment (PGSSLMODE,
// PGHOST...) counts as pgx reads it.
func Unencrypted(url string) ([]string, error) {
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	var out []string
	add := func(host string, port uint16, tls bool) {
		if !tls && !appstore.LocalHost(host) {
			out = append(out, net.JoinHostPort(host, strconv.Itoa(int(port))))
		}
	}
	add(cfg.Host, cfg.Port, cfg.TLSConfig != nil)
	for _, f := range cfg.Fallbacks {
		add(f.Host, f.Port, f.TLSConfig != nil)
	}
	return uniq(out), nil
}

// uniq drops repeats, keeping the first of each.
func uniq(s []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

package mysql

import (
	"net"

	driver "github.com/go-sql-driver/mysql"

	"github.com/herald-rt/herald/appstore"
)

// Unencrypted returns the server of dsn (host:port) when it is off this machine and a
// connection may reach it without TLS: no tls parameter, tls=false, or tls=preferred (which
// goes on in plaintext when the server offers no TLS). tls=true, skip-verify or a registered
// configuration always encrypt. nil for a server on this machine or over a Unix socket.
func Unencrypted(dsn string) ([]string, error) {
	cfg, err := driver.ParseDSN(dsn)
	if err != nil {
		return nil, CheckDSN(dsn)
	}
	if cfg.Net == "unix" {
		return nil, nil
	}
	if cfg.TLS != nil && !cfg.AllowFallbackToPlaintext {
		return nil, nil
	}
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		host = cfg.Addr
	}
	if appstore.LocalHost(host) {
		return nil, nil
	}
	return []string{cfg.Addr}, nil
}

package appstore_test

import (
	"slices"
	"testing"

	"github.com/herald-rt/herald/appstore"
	"github.com/herald-rt/herald/appstore/mysql"
	"github.com/herald-rt/herald/appstore/postgres"
)

// TestUnencrypted: which database addresses a node warns of at start: a server off this
// machine that a connection may reach without TLS. PostgreSQL: no sslmode (pgx's prefer),
// prefer, allow and disable may; require, verify-ca and verify-full may not. MySQL: no tls,
// tls=false and tls=preferred may; tls=true and skip-verify may not. Loopback, localhost and
// Unix sockets are this machine.
func TestUnencrypted(t *testing.T) {
	t.Setenv("PGSSLMODE", "") // as pgx would read it
	for _, tc := range []struct {
		url  string
		want []string
	}{
		{"postgres://u:p@db.example:5432/apps", []string{"db.example:5432"}},
		{"postgres://u:p@10.0.0.7/apps?sslmode=prefer", []string{"10.0.0.7:5432"}},
		{"postgres://u:p@10.0.0.7/apps?sslmode=allow", []string{"10.0.0.7:5432"}},
		{"postgres://u:p@10.0.0.7/apps?sslmode=disable", []string{"10.0.0.7:5432"}},
		{"postgres://u:p@10.0.0.7/apps?sslmode=require", nil},
		{"postgres://u:p@10.0.0.7/apps?sslmode=verify-ca", nil},
		{"postgres://u:p@db.example/apps?sslmode=verify-full", nil},
		{"postgres://u:p@127.0.0.1:5433/apps", nil},
		{"postgres://u:p@localhost/apps?sslmode=disable", nil},
		{"postgres://u:p@[::1]:5432/apps", nil},
		{"postgres://u:p@/apps?host=/var/run/postgresql", nil},
		{"postgres://u:p@127.0.0.1,db2.example:5432/apps", []string{"db2.example:5432"}},
		{"host=db.example user=u dbname=apps sslmode=prefer", []string{"db.example:5432"}},
	} {
		got, err := postgres.Unencrypted(tc.url)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("postgres %s: %v, %v; want %v", tc.url, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		dsn  string
		want []string
	}{
		{"u:p@tcp(db.example:3306)/apps", []string{"db.example:3306"}},
		{"u:p@tcp(db.example)/apps?tls=false", []string{"db.example:3306"}},
		{"u:p@tcp(10.0.0.8:3307)/apps?tls=preferred", []string{"10.0.0.8:3307"}},
		{"u:p@tcp(db.example:3306)/apps?tls=true", nil},
		{"u:p@tcp(db.example:3306)/apps?tls=skip-verify", nil},
		{"u:p@tcp(127.0.0.1:3306)/apps", nil},
		{"u:p@tcp(localhost:3306)/apps", nil},
		{"u:p@unix(/run/mysqld/mysqld.sock)/apps", nil},
	} {
		if got, err := mysql.Unencrypted(tc.dsn); err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("mysql %s: %v, %v; want %v", tc.dsn, got, err, tc.want)
		}
	}
	for host, local := range map[string]bool{"127.0.0.1": true, "127.9.8.7": true, "::1": true, "[::1]": true, "localhost": true,
		"/tmp": true, "10.0.0.1": false, "db.example": false, "": false} {
		if appstore.LocalHost(host) != local {
			t.Errorf("LocalHost(%q) = %v", host, !local)
		}
	}
}

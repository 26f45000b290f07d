package servicetest

import (
	"net"
	"testing"
	"time"
)

// TestSQLServers: PostgreSQL and MariaDB start on free ports, answer, stop and start again.
func TestSQLServers(t *testing.T) {
	for name, start := range map[string]func(testing.TB) *SQL{"postgres": Postgres, "mariadb": MariaDB} {
		t.Run(name, func(t *testing.T) {
			db := start(t)
			dial := func() error {
				c, err := net.DialTimeout("tcp", db.Addr(), time.Second)
				if err == nil {
					c.Close()
				}
				return err
			}
			if err := dial(); err != nil {
				t.Fatalf("%s does not answer on %s: %v", name, db.Addr(), err)
			}
			db.Stop(t)
			if dial() == nil {
				t.Fatalf("%s still answers after Stop", name)
			}
			db.Start(t)
			if err := dial(); err != nil {
				t.Fatalf("%s does not answer after Start: %v", name, err)
			}
		})
	}
}

package servicetest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// SQL is a database server (PostgreSQL or MariaDB) with one database, "herald", and a user
// that owns it; the Server it embeds stops and restarts it on the same port.
type SQL struct {
	*Server
	User, Password, Database string
}

// PostgresURL is the server's address in the form app_store.postgres.url takes.
func (s *SQL) PostgresURL() string {
	return fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable", s.User, s.Password, s.Addr(), s.Database)
}

// MySQLDSN is the server's address in the form app_store.mysql.dsn takes.
func (s *SQL) MySQLDSN() string {
	return fmt.Sprintf("%s:%s@tcp(%s)/%s", s.User, s.Password, s.Addr(), s.Database)
}

// postgresBin finds one of PostgreSQL's programs: on the PATH, else in Debian's versioned
// directory (/usr/lib/postgresql/N/bin), which the package does not put on the PATH.
func postgresBin(t testing.TB, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name); len(m) > 0 {
		return m[len(m)-1]
	}
	if testing.Short() {
		t.Skipf("%s (PostgreSQL) is not installed (-short: skipping; the full suite fails here)", name)
	}
	t.Fatalf("%s is not installed: apt-get update && apt-get install -y postgresql (scripts/test.sh installs it when absent)", name)
	return ""
}

// sqlDir is a fresh directory for a database server's files, owned by uid and gid when they
// are not -1 (postgres refuses to run as root, so it runs as the postgres user), removed on
// cleanup. It is not under t.TempDir, whose parents only root may enter.
func sqlDir(t testing.TB, prefix string, uid, gid int) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if uid >= 0 {
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// logSays is a readiness probe: the server's log (the process's output) contains line.
func (s *Server) logSays(line string) error {
	b, _ := os.ReadFile(s.proc.log)
	if !strings.Contains(string(b), line) {
		return fmt.Errorf("its log does not say %q yet", line)
	}
	return nil
}

// Postgres starts a PostgreSQL server (Debian's postgresql package) on a free loopback
// port, in a temporary directory, with a database "herald" owned by the user "herald"
// (password authentication over TCP). Running as root, it runs as the postgres user. Stop
// shuts it down as a crash would (immediate shutdown); Start restarts it on the same port.
func Postgres(t testing.TB) *SQL {
	t.Helper()
	initdb := postgresBin(t, "initdb")
	postgres := postgresBin(t, "postgres")
	createdb := postgresBin(t, "createdb")
	probe := exec.Command("true")
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		if uid, gid = asUser(probe, "postgres"); uid < 0 {
			t.Fatal("running as root, and there is no postgres user to run PostgreSQL as (apt-get install -y postgresql makes one)")
		}
	}
	asPostgres := func(cmd *exec.Cmd) {
		if uid >= 0 {
			asUser(cmd, "postgres")
		}
	}
	dir := sqlDir(t, "herald-postgres-", uid, gid)
	db := &SQL{User: "herald", Password: "herald-test-password", Database: "herald"}
	pwfile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwfile, []byte(db.Password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if uid >= 0 {
		_ = os.Chown(pwfile, uid, gid)
	}
	data := filepath.Join(dir, "data")
	cmd := exec.Command(initdb, "-D", data, "-U", db.User, "--pwfile", pwfile, "-E", "UTF8", "--no-sync",
		"--auth-local=trust", "--auth-host=scram-sha-256")
	asPostgres(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	srv := &Server{Name: "postgres", bin: postgres,
		args: func(port int, _ string) []string {
			return []string{"-D", data, "-p", strconv.Itoa(port), "-k", dir, "-c", "listen_addresses=127.0.0.1",
				"-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=200"}
		}}
	srv.proc = process{name: "postgres", dir: dir, tail: 2000, every: 20 * time.Millisecond, prepare: asPostgres, quit: syscall.SIGQUIT}
	srv.ready = func(net.Conn) error { return srv.logSays("database system is ready to accept connections") }
	startSQL(t, srv)
	cmd = exec.Command(createdb, "-h", "127.0.0.1", "-p", strconv.Itoa(srv.Port), "-U", db.User, db.Database)
	cmd.Env = append(os.Environ(), "PGPASSWORD="+db.Password)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("createdb: %v\n%s", err, out)
	}
	db.Server = srv
	return db
}

// MariaDB starts a MariaDB server (Debian's mariadb-server package) on a free loopback port,
// in a temporary directory, with a database "herald" and a user "herald" that may do
// anything in it. Stop kills it as a crash would; Start restarts it on the same port.
func MariaDB(t testing.TB) *SQL {
	t.Helper()
	mariadbd := find(t, "mariadbd")
	install := find(t, "mariadb-install-db")
	dir := sqlDir(t, "herald-mariadb-", -1, -1)
	data := filepath.Join(dir, "data")
	cmd := exec.Command(install, "--no-defaults", "--datadir="+data, "--auth-root-authentication-method=normal",
		"--skip-test-db", "--user="+currentUser())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	db := &SQL{User: "herald", Password: "herald-test-password", Database: "herald"}
	initSQL := filepath.Join(dir, "init.sql")
	err := os.WriteFile(initSQL, []byte(fmt.Sprintf("CREATE DATABASE IF NOT EXISTS %s;\n"+
		"CREATE USER IF NOT EXISTS '%s'@'%%' IDENTIFIED BY '%s';\n"+
		"GRANT ALL ON %s.* TO '%s'@'%%';\n", db.Database, db.User, db.Password, db.Database, db.User)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	srv := &Server{Name: "mariadbd", bin: mariadbd,
		args: func(port int, _ string) []string {
			return []string{"--no-defaults", "--datadir=" + data, "--port=" + strconv.Itoa(port), "--bind-address=127.0.0.1",
				"--socket=" + filepath.Join(dir, "sock"), "--pid-file=" + filepath.Join(dir, "pid"), "--user=" + currentUser(),
				"--skip-name-resolve", "--innodb-flush-log-at-trx-commit=2", "--innodb-buffer-pool-size=64M",
				"--init-file=" + initSQL, "--max-connections=200"}
		}}
	srv.proc = process{name: "mariadbd", dir: dir, tail: 2000, every: 20 * time.Millisecond}
	srv.ready = func(net.Conn) error { return srv.logSays("ready for connections") }
	startSQL(t, srv)
	db.Server = srv
	return db
}

func currentUser() string {
	if os.Geteuid() == 0 {
		return "root"
	}
	return strconv.Itoa(os.Geteuid())
}

// startSQL is start for a server whose binary and process are set up already.
func startSQL(t testing.TB, s *Server) {
	t.Helper()
	t.Cleanup(s.proc.kill)
	var errs []string
	for attempt := 0; attempt < 5; attempt++ {
		s.Port = freePort(t)
		if err := s.run(); err == nil {
			return
		} else {
			errs = append(errs, err.Error())
		}
	}
	t.Fatalf("%s did not start: %s", s.Name, strings.Join(errs, "; "))
}

package servicetest

import (
	"errors"
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
	dir                      string // its files, removed by Close
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
func postgresBin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name); len(m) > 0 {
		return m[len(m)-1], nil
	}
	return "", fmt.Errorf("%s is not installed: apt-get update && apt-get install -y postgresql (scripts/test.sh installs it when absent)", name)
}

// sqlDir is a fresh directory for a database server's files, owned by uid and gid when they
// are not -1 (postgres refuses to run as root, so it runs as the postgres user). It is not
// under t.TempDir, whose parents only root may enter.
func sqlDir(prefix string, uid, gid int) (string, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	if uid >= 0 {
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
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
// The test's cleanup stops it and removes its files.
func Postgres(t testing.TB) *SQL {
	t.Helper()
	for _, name := range []string{"initdb", "postgres", "createdb"} {
		if _, err := postgresBin(name); err != nil {
			if testing.Short() {
				t.Skipf("%v (-short: skipping; the full suite fails here)", err)
			}
			t.Fatal(err)
		}
	}
	db, err := StartPostgres()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}

// StartPostgres is Postgres for a program that is not a test (cmd/sqlserver); Close stops
// the server and removes its files.
func StartPostgres() (*SQL, error) {
	initdb, err := postgresBin("initdb")
	if err != nil {
		return nil, err
	}
	postgres, _ := postgresBin("postgres")
	createdb, _ := postgresBin("createdb")
	probe := exec.Command("true")
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		if uid, gid = asUser(probe, "postgres"); uid < 0 {
			return nil, errors.New("running as root, and there is no postgres user to run PostgreSQL as (apt-get install -y postgresql makes one)")
		}
	}
	asPostgres := func(cmd *exec.Cmd) {
		if uid >= 0 {
			asUser(cmd, "postgres")
		}
	}
	dir, err := sqlDir("herald-postgres-", uid, gid)
	if err != nil {
		return nil, err
	}
	db := &SQL{User: "herald", Password: "herald-test-password", Database: "herald", dir: dir}
	fail := func(err error) (*SQL, error) { db.Close(); return nil, err }
	pwfile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwfile, []byte(db.Password+"\n"), 0o600); err != nil {
		return fail(err)
	}
	if uid >= 0 {
		_ = os.Chown(pwfile, uid, gid)
	}
	data := filepath.Join(dir, "data")
	cmd := exec.Command(initdb, "-D", data, "-U", db.User, "--pwfile", pwfile, "-E", "UTF8", "--no-sync",
		"--auth-local=trust", "--auth-host=scram-sha-256")
	asPostgres(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %v\n%s", err, out))
	}
	// fsync off: a test's data need not survive the machine, only the server's crash (Stop),
	// which the OS's page cache covers.
	srv := &Server{Name: "postgres", bin: postgres,
		args: func(port int, _ string) []string {
			return []string{"-D", data, "-p", strconv.Itoa(port), "-k", dir, "-c", "listen_addresses=127.0.0.1",
				"-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=200"}
		}}
	srv.proc = process{name: "postgres", dir: dir, tail: 2000, every: 20 * time.Millisecond, prepare: asPostgres, quit: syscall.SIGQUIT}
	srv.ready = func(net.Conn) error { return srv.logSays("database system is ready to accept connections") }
	db.Server = srv
	if err := startSQL(srv); err != nil {
		return fail(err)
	}
	cmd = exec.Command(createdb, "-h", "127.0.0.1", "-p", strconv.Itoa(srv.Port), "-U", db.User, db.Database)
	cmd.Env = append(os.Environ(), "PGPASSWORD="+db.Password)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("createdb: %v\n%s", err, out))
	}
	return db, nil
}

// Close stops the server (if running) and removes its files.
func (s *SQL) Close() {
	if s.Server != nil {
		s.proc.kill()
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

// MariaDB starts a MariaDB server (Debian's mariadb-server package) on a free loopback port,
// in a temporary directory, with a database "herald" and a user "herald" that may do
// anything in it. Stop kills it as a crash would; Start restarts it on the same port.
func MariaDB(t testing.TB) *SQL {
	t.Helper()
	mariadbd := find(t, "mariadbd")
	install := find(t, "mariadb-install-db")
	dir, err := sqlDir("herald-mariadb-", -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	data := filepath.Join(dir, "data")
	cmd := exec.Command(install, "--no-defaults", "--datadir="+data, "--auth-root-authentication-method=normal",
		"--skip-test-db", "--user="+currentUser())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	db := &SQL{User: "herald", Password: "herald-test-password", Database: "herald"}
	initSQL := filepath.Join(dir, "init.sql")
	err = os.WriteFile(initSQL, []byte(fmt.Sprintf("CREATE DATABASE IF NOT EXISTS %s;\n"+
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
	t.Cleanup(srv.proc.kill)
	if err := startSQL(srv); err != nil {
		t.Fatal(err)
	}
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
func startSQL(s *Server) error {
	var errs []string
	for attempt := 0; attempt < 5; attempt++ {
		port, err := anyPort()
		if err != nil {
			return err
		}
		s.Port = port
		if err := s.run(); err == nil {
			return nil
		} else {
			errs = append(errs, err.Error())
		}
	}
	return fmt.Errorf("%s did not start: %s", s.Name, strings.Join(errs, "; "))
}

package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/appstore"
)

// Config sets a Source up.
type Config struct {
	DSN   string // user:password@tcp(host:port)/database[?params]
	Table string // default "apps"
	// MaxConns bounds the connections; default 4.
	MaxConns int
}

// Source reads and writes the apps table.
type Source struct {
	cfg   Config
	db    *sql.DB
	table string // quoted
	m     appstore.Mapping
	cols  string
}

var (
	_ appstore.Source        = (*Source)(nil)
	_ appstore.Fingerprinter = (*Source)(nil)
	_ appstore.Getter        = (*Source)(nil)
	_ appstore.Writer        = (*Source)(nil)
)

var ident = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidName reports whether name may be a table name.
func ValidName(name string) bool { return ident.MatchString(name) }

func quote(name string) string { return "`" + name + "`" }

// CheckDSN reports whether dsn parses, without quoting it (it holds a password).
func CheckDSN(dsn string) error {
	if _, err := driver.ParseDSN(dsn); err != nil {
		return errors.New("cannot parse the DSN (user:password@tcp(host:port)/database)")
	}
	return nil
}

// Open connects and reads which columns the table has.
func Open(ctx context.Context, cfg Config) (*Source, error) {
	if cfg.Table == "" {
		cfg.Table = "apps"
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 4
	}
	if !ValidName(cfg.Table) {
		return nil, fmt.Errorf("mysql: table %q is not a plain name", cfg.Table)
	}
	dc, err := driver.ParseDSN(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("mysql: %w", CheckDSN(cfg.DSN))
	}
	if dc.Timeout == 0 {
		dc.Timeout = 5 * time.Second
	}
	conn, err := driver.NewConnector(dc)
	if err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(cfg.MaxConns)
	db.SetMaxIdleConns(cfg.MaxConns)
	db.SetConnMaxIdleTime(time.Minute)
	s := &Source{cfg: cfg, db: db, table: quote(cfg.Table)}
	if err := s.describe(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func (s *Source) describe(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, `SELECT column_name, data_type FROM information_schema.columns
		WHERE table_schema = DATABASE() AND table_name = ?`, s.cfg.Table)
	if err != nil {
		return fmt.Errorf("mysql: reading the columns of %s: %w", s.cfg.Table, err)
	}
	defer rows.Close()
	var cols []appstore.Column
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			return fmt.Errorf("mysql: reading the columns of %s: %w", s.cfg.Table, err)
		}
		// MySQL's BOOLEAN is tinyint(1): 0/1 suits it.
		cols = append(cols, appstore.Column{Name: name})
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("mysql: reading the columns of %s: %w", s.cfg.Table, err)
	}
	if len(cols) == 0 {
		return fmt.Errorf("mysql: table %s does not exist in this database (or this user may not see it); create it as docs/app-stores.md shows", s.cfg.Table)
	}
	m, err := appstore.Map(s.cfg.Table, cols)
	if err != nil {
		return fmt.Errorf("mysql: %w", err)
	}
	s.m = m
	names := make([]string, len(m.Columns))
	for i, c := range m.Columns {
		names[i] = quote(c.Name)
	}
	s.cols = strings.Join(names, ", ")
	return nil
}

// Mapping is which columns the table has, as Open found them.
func (s *Source) Mapping() appstore.Mapping { return s.m }

// Close implements appstore.Source.
func (s *Source) Close() { s.db.Close() }

// Load implements appstore.Source.
func (s *Source) Load(ctx context.Context) ([]herald.App, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT "+s.cols+" FROM "+s.table)
	if err != nil {
		return nil, err
	}
	return s.collect(rows)
}

// Get implements appstore.Getter.
func (s *Source) Get(ctx context.Context, id string) (herald.App, bool, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT "+s.cols+" FROM "+s.table+" WHERE id = ?", id)
	if err != nil {
		return herald.App{}, false, err
	}
	apps, err := s.collect(rows)
	if len(apps) == 0 {
		return herald.App{}, false, err
	}
	return apps[0], true, err // err: the BadRows of webhooks left out, if any
}

func (s *Source) collect(rows *sql.Rows) ([]herald.App, error) {
	defer rows.Close()
	var out []herald.App
	var bad appstore.BadRows
	vals := make([]any, len(s.m.Columns))
	ptrs := make([]any, len(vals))
	for rows.Next() {
		for i := range vals {
			vals[i] = nil
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		for i := range vals {
			vals[i] = appstore.Normalize(vals[i])
		}
		a, err := s.m.App(vals)
		if err != nil {
			bad = append(bad, fmt.Errorf("app %q: %w", fmt.Sprint(vals[0]), err))
			if !appstore.Usable(err) {
				continue
			}
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(bad) > 0 {
		return out, bad
	}
	return out, nil
}

// Fingerprint implements appstore.Fingerprinter: the row count and the sum of the
// updated_at times (see the postgres package's).
func (s *Source) Fingerprint(ctx context.Context) (string, bool, error) {
	if !s.m.UpdatedAt {
		return "", false, nil
	}
	var n int64
	var sum sql.NullString
	err := s.db.QueryRowContext(ctx, "SELECT COUNT(*), SUM(UNIX_TIMESTAMP("+quote(appstore.UpdatedAt)+")) FROM "+s.table).Scan(&n, &sum)
	return fmt.Sprintf("%d/%s", n, sum.String), true, err
}

// Insert implements appstore.Writer.
func (s *Source) Insert(ctx context.Context, a herald.App) error {
	vals := s.m.Values(&a)
	ph := strings.TrimSuffix(strings.Repeat("?, ", len(vals)), ", ")
	cols := s.cols
	if s.m.UpdatedAt {
		cols += ", " + quote(appstore.UpdatedAt)
		ph += ", NOW(6)"
	}
	_, err := s.db.ExecContext(ctx, "INSERT INTO "+s.table+" ("+cols+") VALUES ("+ph+")", vals...)
	return exists(err)
}

func exists(err error) error {
	var me *driver.MySQLError
	if errors.As(err, &me) && me.Number == 1062 { // ER_DUP_ENTRY
		return fmt.Errorf("%w: %s", appstore.ErrExists, me.Message)
	}
	return err
}

// Update implements appstore.Writer.
func (s *Source) Update(ctx context.Context, a herald.App) error {
	cols, vals := s.m.Updates(&a)
	set := make([]string, len(cols))
	for i, c := range cols {
		set[i] = quote(c) + " = ?"
	}
	if s.m.UpdatedAt {
		set = append(set, quote(appstore.UpdatedAt)+" = NOW(6)")
	}
	args := append(vals, a.ID)
	res, err := s.db.ExecContext(ctx, "UPDATE "+s.table+" SET "+strings.Join(set, ", ")+" WHERE id = ?", args...)
	if err != nil {
		return exists(err)
	}
	// MySQL counts rows changed, not matched: a write of the same values changes none.
	if n, _ := res.RowsAffected(); n == 0 {
		if _, found, err := s.Get(ctx, a.ID); err == nil && !found {
			return appstore.ErrNotFound
		}
	}
	return nil
}

// Delete implements appstore.Writer.
func (s *Source) Delete(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, "DELETE FROM "+s.table+" WHERE id = ?", id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return appstore.ErrNotFound
	}
	return nil
}

package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/appstore"
	"github.com/herald-rt/herald/appstore/internal/sqltable"
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
	cfg Config
	db  *sql.DB
	t   *sqltable.Table
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

// dialect is MySQL's spelling of the statements.
var dialect = sqltable.Dialect{
	Engine: "mysql",
	Quote:  quote,
	Param:  func(int) string { return "?" },
	Now:    "NOW(6)",
}

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
	t, err := describe(ctx, db, cfg.Table)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &Source{cfg: cfg, db: db, t: t}, nil
}

func describe(ctx context.Context, db *sql.DB, table string) (*sqltable.Table, error) {
	rows, err := db.QueryContext(ctx, `SELECT column_name, data_type FROM information_schema.columns
		WHERE table_schema = DATABASE() AND table_name = ?`, table)
	if err != nil {
		return nil, fmt.Errorf("mysql: reading the columns of %s: %w", table, err)
	}
	defer rows.Close()
	// MySQL's BOOLEAN is tinyint(1): 0/1 suits it.
	return sqltable.Describe(dialect, table, rows, func(string) bool { return false })
}

// Mapping is which columns the table has, as Open found them.
func (s *Source) Mapping() appstore.Mapping { return s.t.Mapping }

// Close implements appstore.Source.
func (s *Source) Close() { s.db.Close() }

// Load implements appstore.Source.
func (s *Source) Load(ctx context.Context) ([]herald.App, error) {
	rows, err := s.db.QueryContext(ctx, s.t.SelectAll())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return s.t.Collect(&scanner{Rows: rows})
}

// Get implements appstore.Getter.
func (s *Source) Get(ctx context.Context, id string) (herald.App, bool, error) {
	rows, err := s.db.QueryContext(ctx, s.t.SelectOne(), id)
	if err != nil {
		return herald.App{}, false, err
	}
	defer rows.Close()
	return sqltable.One(s.t.Collect(&scanner{Rows: rows}))
}

// scanner gives database/sql's rows the Values of pgx's, as sqltable.Collect reads them.
type scanner struct {
	*sql.Rows
	ptrs []any
}

func (r *scanner) Values() ([]any, error) {
	if r.ptrs == nil {
		cols, err := r.Columns()
		if err != nil {
			return nil, err
		}
		r.ptrs = make([]any, len(cols))
	}
	vals := make([]any, len(r.ptrs))
	for i := range vals {
		r.ptrs[i] = &vals[i]
	}
	return vals, r.Scan(r.ptrs...)
}

// Fingerprint implements appstore.Fingerprinter: the row count and the sum of the
// updated_at times (see the postgres package's).
func (s *Source) Fingerprint(ctx context.Context) (string, bool, error) {
	if !s.t.Mapping.UpdatedAt {
		return "", false, nil
	}
	var n int64
	var sum sql.NullString
	err := s.db.QueryRowContext(ctx, "SELECT COUNT(*), SUM(UNIX_TIMESTAMP("+quote(appstore.UpdatedAt)+")) FROM "+s.t.Quoted).Scan(&n, &sum)
	return fmt.Sprintf("%d/%s", n, sum.String), true, err
}

// Insert implements appstore.Writer.
func (s *Source) Insert(ctx context.Context, a herald.App) error {
	q, args := s.t.Insert(&a)
	_, err := s.db.ExecContext(ctx, q, args...)
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
	q, args := s.t.Update(&a)
	res, err := s.db.ExecContext(ctx, q, args...)
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
	res, err := s.db.ExecContext(ctx, s.t.DeleteOne(), id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return appstore.ErrNotFound
	}
	return nil
}

package postgres

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/appstore"
	"github.com/herald-rt/herald/appstore/internal/sqltable"
)

// Config sets a Source up.
type Config struct {
	URL   string // postgres://user:password@host:port/database?sslmode=...
	Table string // default "apps"; may be schema-qualified ("herald.apps")
	// InstallTrigger creates (or replaces) the function and trigger of TriggerSQL on Table at
	// Open, so that every change notifies Channel. Without it herald listens all the same:
	// the trigger may be installed by hand.
	InstallTrigger bool
	// Channel is the notification channel; default "herald_apps".
	Channel string
	// MaxConns bounds the pool; default 4 (one listens, the others read and write).
	MaxConns int32
}

// Source reads and writes the apps table.
type Source struct {
	cfg  Config
	pool *pgxpool.Pool
	t    *sqltable.Table
}

var (
	_ appstore.Source        = (*Source)(nil)
	_ appstore.Fingerprinter = (*Source)(nil)
	_ appstore.Getter        = (*Source)(nil)
	_ appstore.Notifier      = (*Source)(nil)
	_ appstore.Writer        = (*Source)(nil)
)

// ident is what a table or channel name may be: letters, digits and underscores, optionally
// schema-qualified.
var ident = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// ValidName reports whether name may be a table or channel name.
func ValidName(name string) bool { return ident.MatchString(name) }

func quote(name string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = `"` + p + `"`
	}
	return strings.Join(parts, ".")
}

// dialect is PostgreSQL's spelling of the statements.
var dialect = sqltable.Dialect{
	Engine: "postgres",
	Quote:  quote,
	Param:  func(i int) string { return fmt.Sprintf("$%d", i) },
	Now:    "now()",
}

// Open connects, reads which columns the table has and, when asked, installs the trigger.
func Open(ctx context.Context, cfg Config) (*Source, error) {
	if cfg.Table == "" {
		cfg.Table = "apps"
	}
	if cfg.Channel == "" {
		cfg.Channel = "herald_apps"
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 4
	}
	if !ValidName(cfg.Table) || !ValidName(cfg.Channel) || strings.Contains(cfg.Channel, ".") {
		return nil, fmt.Errorf("postgres: table %q or channel %q is not a plain name", cfg.Table, cfg.Channel)
	}
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("postgres: url: %w", redact(err))
	}
	pc.MaxConns = cfg.MaxConns
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	t, err := describe(ctx, pool, cfg.Table)
	if err != nil {
		pool.Close()
		return nil, err
	}
	if cfg.InstallTrigger {
		if _, err := pool.Exec(ctx, TriggerSQL(cfg.Table, cfg.Channel)); err != nil {
			pool.Close()
			return nil, fmt.Errorf("postgres: installing the trigger on %s: %w", cfg.Table, err)
		}
	}
	return &Source{cfg: cfg, pool: pool, t: t}, nil
}

// redact drops what a URL parse error may quote of the URL (its password).
func redact(err error) error {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		return errors.New("cannot parse the URL (postgres://user:password@host:port/database)")
	}
	return err
}

// describe reads the table's columns and maps them.
func describe(ctx context.Context, pool *pgxpool.Pool, name string) (*sqltable.Table, error) {
	schema, table := "", name
	if i := strings.IndexByte(table, '.'); i >= 0 {
		schema, table = table[:i], table[i+1:]
	}
	rows, err := pool.Query(ctx, `SELECT column_name, data_type FROM information_schema.columns
		WHERE table_name = $1 AND ($2 = '' AND table_schema = ANY (current_schemas(false)) OR table_schema = $2)`, table, schema)
	if err != nil {
		return nil, fmt.Errorf("postgres: reading the columns of %s: %w", name, err)
	}
	defer rows.Close()
	return sqltable.Describe(dialect, name, rows, func(typ string) bool { return typ == "boolean" })
}

// Mapping is which columns the table has, as Open found them.
func (s *Source) Mapping() appstore.Mapping { return s.t.Mapping }

// Close implements appstore.Source.
func (s *Source) Close() { s.pool.Close() }

// Load implements appstore.Source.
func (s *Source) Load(ctx context.Context) ([]herald.App, error) {
	rows, err := s.pool.Query(ctx, s.t.SelectAll())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return s.t.Collect(numerics{rows})
}

// Get implements appstore.Getter.
func (s *Source) Get(ctx context.Context, id string) (herald.App, bool, error) {
	rows, err := s.pool.Query(ctx, s.t.SelectOne(), id)
	if err != nil {
		return herald.App{}, false, err
	}
	defer rows.Close()
	return sqltable.One(s.t.Collect(numerics{rows}))
}

// numerics are rows whose numeric columns' values are float64 (pgx decodes them as
// pgtype.Numeric, which appstore.Normalize does not know).
type numerics struct{ pgx.Rows }

func (r numerics) Values() ([]any, error) {
	vals, err := r.Rows.Values()
	for i, v := range vals {
		if n, ok := v.(pgtype.Numeric); ok {
			f, _ := n.Float64Value()
			vals[i] = nil
			if f.Valid {
				vals[i] = f.Float64
			}
		}
	}
	return vals, err
}

// Fingerprint implements appstore.Fingerprinter: the row count and the sum of the
// updated_at times, which changes when any row's does (a max alone misses a row written
// with an older time by a transaction that committed late).
func (s *Source) Fingerprint(ctx context.Context) (string, bool, error) {
	if !s.t.Mapping.UpdatedAt {
		return "", false, nil
	}
	var fp string
	err := s.pool.QueryRow(ctx, `SELECT count(*)::text || '/' || coalesce(sum(extract(epoch FROM updated_at)), 0)::text FROM `+s.t.Quoted).Scan(&fp)
	return fp, true, err
}

// Listen implements appstore.Notifier on one connection of the pool.
func (s *Source) Listen(ctx context.Context, ready func(), changed func(id string)) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	if _, err := c.Exec(ctx, "LISTEN "+quote(s.cfg.Channel)); err != nil {
		return err
	}
	// The connection now holds a LISTEN: it must not go back to the pool for a query.
	defer c.Conn().Close(context.Background())
	ready()
	for {
		n, err := c.Conn().WaitForNotification(ctx)
		if err != nil {
			return err
		}
		changed(n.Payload)
	}
}

// Insert implements appstore.Writer.
func (s *Source) Insert(ctx context.Context, a herald.App) error {
	q, args := s.t.Insert(&a)
	_, err := s.pool.Exec(ctx, q, args...)
	return exists(err)
}

// exists wraps a unique_violation in appstore.ErrExists.
func exists(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" { // unique_violation
		return fmt.Errorf("%w: %s", appstore.ErrExists, pe.Detail)
	}
	return err
}

// Update implements appstore.Writer.
func (s *Source) Update(ctx context.Context, a herald.App) error {
	q, args := s.t.Update(&a)
	tag, err := s.pool.Exec(ctx, q, args...)
	if err != nil {
		return exists(err)
	}
	if tag.RowsAffected() == 0 {
		return appstore.ErrNotFound
	}
	return nil
}

// Delete implements appstore.Writer.
func (s *Source) Delete(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, s.t.DeleteOne(), id)
	if err == nil && tag.RowsAffected() == 0 {
		return appstore.ErrNotFound
	}
	return err
}

// TriggerSQL is the function and trigger that notify channel with the id of each row of
// table inserted, updated or deleted (docs/app-stores.md shows it for installing by hand).
func TriggerSQL(table, channel string) string {
	fn := quote(strings.ReplaceAll(table, ".", "_") + "_herald_notify")
	if i := strings.IndexByte(table, '.'); i >= 0 {
		fn = quote(table[:i]) + "." + quote(table[i+1:]+"_herald_notify")
	}
	// One statement list is one transaction; the lock keeps nodes starting together from
	// replacing the function at the same moment (which PostgreSQL refuses).
	return fmt.Sprintf(`SELECT pg_advisory_xact_lock(7230311);
CREATE OR REPLACE FUNCTION %[1]s() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    PERFORM pg_notify('%[3]s', OLD.id::text);
  ELSE
    PERFORM pg_notify('%[3]s', NEW.id::text);
    IF TG_OP = 'UPDATE' AND OLD.id IS DISTINCT FROM NEW.id THEN
      PERFORM pg_notify('%[3]s', OLD.id::text);
    END IF;
  END IF;
  RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS herald_notify ON %[2]s;
CREATE TRIGGER herald_notify AFTER INSERT OR UPDATE OR DELETE ON %[2]s
  FOR EACH ROW EXECUTE FUNCTION %[1]s();`, fn, quote(table), channel)
}

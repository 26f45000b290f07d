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
	cfg   Config
	pool  *pgxpool.Pool
	table string // quoted
	m     appstore.Mapping
	cols  string // the mapped columns, quoted, comma-separated
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
	s := &Source{cfg: cfg, pool: pool, table: quote(cfg.Table)}
	if err := s.describe(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if cfg.InstallTrigger {
		if _, err := pool.Exec(ctx, TriggerSQL(cfg.Table, cfg.Channel)); err != nil {
			pool.Close()
			return nil, fmt.Errorf("postgres: installing the trigger on %s: %w", cfg.Table, err)
		}
	}
	return s, nil
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
func (s *Source) describe(ctx context.Context) error {
	schema, table := "", s.cfg.Table
	if i := strings.IndexByte(table, '.'); i >= 0 {
		schema, table = table[:i], table[i+1:]
	}
	rows, err := s.pool.Query(ctx, `SELECT column_name, data_type FROM information_schema.columns
		WHERE table_name = $1 AND ($2 = '' AND table_schema = ANY (current_schemas(false)) OR table_schema = $2)`, table, schema)
	if err != nil {
		return fmt.Errorf("postgres: reading the columns of %s: %w", s.cfg.Table, err)
	}
	var cols []appstore.Column
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			return fmt.Errorf("postgres: reading the columns of %s: %w", s.cfg.Table, err)
		}
		cols = append(cols, appstore.Column{Name: name, Bool: typ == "boolean"})
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("postgres: reading the columns of %s: %w", s.cfg.Table, err)
	}
	if len(cols) == 0 {
		return fmt.Errorf("postgres: table %s does not exist (or this user may not see it); create it as docs/app-stores.md shows", s.cfg.Table)
	}
	m, err := appstore.Map(s.cfg.Table, cols)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
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
func (s *Source) Close() { s.pool.Close() }

// Load implements appstore.Source.
func (s *Source) Load(ctx context.Context) ([]herald.App, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+s.cols+" FROM "+s.table)
	if err != nil {
		return nil, err
	}
	return collect(rows, s.m)
}

// Get implements appstore.Getter.
func (s *Source) Get(ctx context.Context, id string) (herald.App, bool, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+s.cols+" FROM "+s.table+" WHERE id = $1", id)
	if err != nil {
		return herald.App{}, false, err
	}
	apps, err := collect(rows, s.m)
	if len(apps) == 0 {
		return herald.App{}, false, err
	}
	return apps[0], true, err // err: the BadRows of webhooks left out, if any
}

func collect(rows pgx.Rows, m appstore.Mapping) ([]herald.App, error) {
	defer rows.Close()
	var out []herald.App
	var bad appstore.BadRows
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil, err
		}
		for i, v := range vals {
			if n, ok := v.(pgtype.Numeric); ok { // a numeric column
				f, _ := n.Float64Value()
				v = f.Float64
				if !f.Valid {
					v = nil
				}
			}
			vals[i] = appstore.Normalize(v)
		}
		a, err := m.App(vals)
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
// updated_at times, which changes when any row's does (a max alone misses a row written
// with an older time by a transaction that committed late).
func (s *Source) Fingerprint(ctx context.Context) (string, bool, error) {
	if !s.m.UpdatedAt {
		return "", false, nil
	}
	var fp string
	err := s.pool.QueryRow(ctx, `SELECT count(*)::text || '/' || coalesce(sum(extract(epoch FROM updated_at)), 0)::text FROM `+s.table).Scan(&fp)
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
	vals := s.m.Values(&a)
	ph := make([]string, len(vals))
	for i := range ph {
		ph[i] = fmt.Sprintf("$%d", i+1)
	}
	cols := s.cols
	if s.m.UpdatedAt {
		cols += ", " + quote(appstore.UpdatedAt)
		ph = append(ph, "now()")
	}
	_, err := s.pool.Exec(ctx, "INSERT INTO "+s.table+" ("+cols+") VALUES ("+strings.Join(ph, ", ")+")", vals...)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" { // unique_violation
		return fmt.Errorf("%w: %s", appstore.ErrExists, pe.Detail)
	}
	return err
}

// Update implements appstore.Writer.
func (s *Source) Update(ctx context.Context, a herald.App) error {
	cols, vals := s.m.Updates(&a)
	set := make([]string, len(cols))
	for i, c := range cols {
		set[i] = fmt.Sprintf("%s = $%d", quote(c), i+2)
	}
	if s.m.UpdatedAt {
		set = append(set, quote(appstore.UpdatedAt)+" = now()")
	}
	tag, err := s.pool.Exec(ctx, "UPDATE "+s.table+" SET "+strings.Join(set, ", ")+" WHERE id = $1", append([]any{a.ID}, vals...)...)
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == "23505":
		return fmt.Errorf("%w: %s", appstore.ErrExists, pe.Detail)
	case err != nil:
		return err
	case tag.RowsAffected() == 0:
		return appstore.ErrNotFound
	}
	return nil
}

// Delete implements appstore.Writer.
func (s *Source) Delete(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, "DELETE FROM "+s.table+" WHERE id = $1", id)
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

package sqltable

import (
	"fmt"
	"strings"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/appstore"
)

// Dialect is what an engine spells its own way.
type Dialect struct {
	// Engine names the engine at the start of errors ("postgres", "mysql").
	Engine string
	// Quote quotes a table or column name (already checked to be a plain name).
	Quote func(name string) string
	// Param is the i-th placeholder of a statement, from 1.
	Param func(i int) string
	// Now is the current time, as a write sets updated_at.
	Now string
}

// Rows is a query's result: *sql.Rows and pgx.Rows are Rows.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// Table is an apps table as Open found it: which columns it has, and the statements on them.
type Table struct {
	d Dialect
	// Name is the table's name as configured; Quoted is it quoted.
	Name, Quoted string
	// Mapping is which column holds each field of herald.App.
	Mapping appstore.Mapping
	cols    string // the mapped columns, quoted, comma-separated
}

// Describe reads the rows of (column_name, data_type) that information_schema.columns holds
// for the table named name, and maps them: a column whose data type isBool holds true/false,
// any other 0/1. It fails when the table has no column (it does not exist, or this user
// cannot see it) or misses a required one.
func Describe(d Dialect, name string, rows Rows, isBool func(dataType string) bool) (*Table, error) {
	var cols []appstore.Column
	for rows.Next() {
		var col, typ string
		if err := rows.Scan(&col, &typ); err != nil {
			return nil, fmt.Errorf("%s: reading the columns of %s: %w", d.Engine, name, err)
		}
		cols = append(cols, appstore.Column{Name: col, Bool: isBool(typ)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: reading the columns of %s: %w", d.Engine, name, err)
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("%s: table %s does not exist (or this user may not see it); create it as docs/app-stores.md shows", d.Engine, name)
	}
	m, err := appstore.Map(name, cols)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.Engine, err)
	}
	names := make([]string, len(m.Columns))
	for i, c := range m.Columns {
		names[i] = d.Quote(c.Name)
	}
	return &Table{d: d, Name: name, Quoted: d.Quote(name), Mapping: m, cols: strings.Join(names, ", ")}, nil
}

// SelectAll reads every app's row.
func (t *Table) SelectAll() string { return "SELECT " + t.cols + " FROM " + t.Quoted }

// SelectOne reads the row whose id is the statement's one argument.
func (t *Table) SelectOne() string { return t.SelectAll() + " WHERE id = " + t.d.Param(1) }

// DeleteOne deletes the row whose id is the statement's one argument.
func (t *Table) DeleteOne() string { return "DELETE FROM " + t.Quoted + " WHERE id = " + t.d.Param(1) }

// Insert is the statement that inserts a, and its arguments; it sets updated_at where the
// table has it.
func (t *Table) Insert(a *herald.App) (string, []any) {
	args := t.Mapping.Values(a)
	ph := make([]string, len(args))
	for i := range ph {
		ph[i] = t.d.Param(i + 1)
	}
	cols := t.cols
	if t.Mapping.UpdatedAt {
		cols += ", " + t.d.Quote(appstore.UpdatedAt)
		ph = append(ph, t.d.Now)
	}
	return "INSERT INTO " + t.Quoted + " (" + cols + ") VALUES (" + strings.Join(ph, ", ") + ")", args
}

// Update is the statement that writes a to the row of a.ID (appstore.Writer's Update), and
// its arguments; it sets updated_at where the table has it.
func (t *Table) Update(a *herald.App) (string, []any) {
	cols, args := t.Mapping.Updates(a)
	set := make([]string, len(cols))
	for i, c := range cols {
		set[i] = t.d.Quote(c) + " = " + t.d.Param(i+1)
	}
	if t.Mapping.UpdatedAt {
		set = append(set, t.d.Quote(appstore.UpdatedAt)+" = "+t.d.Now)
	}
	args = append(args, a.ID)
	return "UPDATE " + t.Quoted + " SET " + strings.Join(set, ", ") + " WHERE id = " + t.d.Param(len(args)), args
}

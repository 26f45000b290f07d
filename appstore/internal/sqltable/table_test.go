package sqltable

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/appstore"
)

var (
	dollars = Dialect{Engine: "postgres", Quote: func(n string) string { return `"` + n + `"` },
		Param: func(i int) string { return fmt.Sprintf("$%d", i) }, Now: "now()"}
	marks = Dialect{Engine: "mysql", Quote: func(n string) string { return "`" + n + "`" },
		Param: func(int) string { return "?" }, Now: "NOW(6)"}
)

// rows are the rows of a query, as a driver hands them over.
type rows struct {
	vals [][]any
	at   int
	err  error
}

func (r *rows) Next() bool { r.at++; return r.at <= len(r.vals) }
func (r *rows) Err() error { return r.err }
func (r *rows) Values() ([]any, error) {
	return r.vals[r.at-1], nil
}
func (r *rows) Scan(dest ...any) error {
	for i, v := range r.vals[r.at-1] {
		*dest[i].(*string) = v.(string)
	}
	return nil
}

func describe(t *testing.T, d Dialect, cols ...string) *Table {
	t.Helper()
	var r rows
	for _, c := range cols {
		r.vals = append(r.vals, []any{c, "boolean"})
	}
	tb, err := Describe(d, "apps", &r, func(typ string) bool { return typ == "boolean" && d.Engine == "postgres" })
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func TestStatements(t *testing.T) {
	a := &herald.App{ID: "a1", Key: "k", Secret: "s"}
	for _, c := range []struct {
		d                             Dialect
		cols                          []string
		all, one, del, insert, update string
		insertArgs, updateArgs        []any
	}{
		{d: dollars, cols: []string{"id", "key", "secret", "enabled"},
			all:        `SELECT "id", "key", "secret", "enabled" FROM "apps"`,
			one:        `SELECT "id", "key", "secret", "enabled" FROM "apps" WHERE id = $1`,
			del:        `DELETE FROM "apps" WHERE id = $1`,
			insert:     `INSERT INTO "apps" ("id", "key", "secret", "enabled") VALUES ($1, $2, $3, $4)`,
			update:     `UPDATE "apps" SET "key" = $1, "secret" = $2, "enabled" = $3 WHERE id = $4`,
			insertArgs: []any{"a1", "k", "s", true},
			updateArgs: []any{"k", "s", true, "a1"}},
		{d: marks, cols: []string{"id", "key", "secret", "enabled", "updated_at"},
			all:        "SELECT `id`, `key`, `secret`, `enabled` FROM `apps`",
			one:        "SELECT `id`, `key`, `secret`, `enabled` FROM `apps` WHERE id = ?",
			del:        "DELETE FROM `apps` WHERE id = ?",
			insert:     "INSERT INTO `apps` (`id`, `key`, `secret`, `enabled`, `updated_at`) VALUES (?, ?, ?, ?, NOW(6))",
			update:     "UPDATE `apps` SET `key` = ?, `secret` = ?, `enabled` = ?, `updated_at` = NOW(6) WHERE id = ?",
			insertArgs: []any{"a1", "k", "s", int64(1)},
			updateArgs: []any{"k", "s", int64(1), "a1"}},
	} {
		tb := describe(t, c.d, c.cols...)
		if got := tb.SelectAll(); got != c.all {
			t.Errorf("%s SelectAll:\n%s\nwant\n%s", c.d.Engine, got, c.all)
		}
		if got := tb.SelectOne(); got != c.one {
			t.Errorf("%s SelectOne:\n%s\nwant\n%s", c.d.Engine, got, c.one)
		}
		if got := tb.DeleteOne(); got != c.del {
			t.Errorf("%s DeleteOne:\n%s\nwant\n%s", c.d.Engine, got, c.del)
		}
		q, args := tb.Insert(a)
		if q != c.insert || !reflect.DeepEqual(args, c.insertArgs) {
			t.Errorf("%s Insert:\n%s %v\nwant\n%s %v", c.d.Engine, q, args, c.insert, c.insertArgs)
		}
		q, args = tb.Update(a)
		if q != c.update || !reflect.DeepEqual(args, c.updateArgs) {
			t.Errorf("%s Update:\n%s %v\nwant\n%s %v", c.d.Engine, q, args, c.update, c.updateArgs)
		}
	}
}

func TestDescribeRefuses(t *testing.T) {
	_, err := Describe(marks, "apps", &rows{}, func(string) bool { return false })
	if err == nil || !strings.HasPrefix(err.Error(), "mysql: table apps does not exist") {
		t.Errorf("no columns: %v, want the table does not exist", err)
	}
	_, err = Describe(marks, "apps", &rows{vals: [][]any{{"id", "varchar"}, {"key", "varchar"}}}, func(string) bool { return false })
	if err == nil || !strings.Contains(err.Error(), "no column secret") {
		t.Errorf("no secret: %v, want the column named", err)
	}
	failed := errors.New("connection reset")
	_, err = Describe(marks, "apps", &rows{err: failed}, func(string) bool { return false })
	if !errors.Is(err, failed) {
		t.Errorf("a failed read: %v, want it wrapped", err)
	}
}

func TestCollect(t *testing.T) {
	tb := describe(t, dollars, "id", "key", "secret", "webhooks")
	apps, err := tb.Collect(&rows{vals: [][]any{
		{"a1", "k1", "s1", nil},
		{"", "k2", "s2", nil},                  // no id: no app
		{"a3", "k3", "s3", []byte("not json")}, // an app without its webhooks
	}})
	var bad appstore.BadRows
	if !errors.As(err, &bad) || len(bad) != 2 {
		t.Fatalf("err %v, want the BadRows of two rows", err)
	}
	if len(apps) != 2 || apps[0].ID != "a1" || apps[1].ID != "a3" {
		t.Fatalf("apps %+v, want a1 and a3", apps)
	}
	a, found, err := One(apps[1:], err)
	if !found || a.ID != "a3" || err == nil {
		t.Errorf("One: %+v %v %v, want a3 found with its problem", a, found, err)
	}
	if _, found, err := One(nil, nil); found || err != nil {
		t.Errorf("One of nothing: found %v, %v", found, err)
	}
	failed := errors.New("connection reset")
	if _, err := tb.Collect(&rows{err: failed}); !errors.Is(err, failed) {
		t.Errorf("a failed read: %v, want it", err)
	}
}

package sqltable

import (
	"fmt"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/appstore"
)

// ValueRows is the result of SelectAll or SelectOne, whose Values are the row's columns as the
// driver decodes them (nil for NULL), in the order selected.
type ValueRows interface {
	Next() bool
	Values() ([]any, error)
	Err() error
}

// Collect reads rows into apps. A row that is no app is left out and its problem is among
// the appstore.BadRows returned with the others; a row that is an app all the same
// (appstore.Usable) is returned, and its problem is among them too.
func (t *Table) Collect(rows ValueRows) ([]herald.App, error) {
	var out []herald.App
	var bad appstore.BadRows
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil, err
		}
		for i := range vals {
			vals[i] = appstore.Normalize(vals[i])
		}
		a, err := t.Mapping.App(vals)
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

// One is the app of SelectOne's rows, as Collect returned them: found is false when there
// is none (err, if any, saying why its row was no app); err is the appstore.BadRows of a row
// that is an app all the same.
func One(apps []herald.App, err error) (a herald.App, found bool, _ error) {
	if len(apps) == 0 {
		return herald.App{}, false, err
	}
	return apps[0], true, err
}

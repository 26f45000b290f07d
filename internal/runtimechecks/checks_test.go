package runtimechecks

import (
	"reflect"
	"testing"
)

// TestChecksComplete: Checks hands in every check validation calls.
func TestChecksComplete(t *testing.T) {
	v := reflect.ValueOf(Checks())
	for i := range v.NumField() {
		if v.Field(i).IsNil() {
			t.Errorf("Checks leaves %s nil", v.Type().Field(i).Name)
		}
	}
}

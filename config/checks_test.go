package config

// RuntimeChecks are the runtime packages' checks, as cmd/herald hands them in
// (internal/runtimechecks). This package's own tests cannot import them, which import this
// package: the external test package sets them (runtimechecks_test.go) before any test runs.
var RuntimeChecks Checks

// testChecks are the runtime packages' checks (RuntimeChecks).
func testChecks() Checks {
	if RuntimeChecks.BusURL == nil {
		panic("config tests: RuntimeChecks not set (runtimechecks_test.go)")
	}
	return RuntimeChecks
}

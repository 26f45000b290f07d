package config_test

import (
	"github.com/herald-rt/herald/config"
	"github.com/herald-rt/herald/internal/runtimechecks"
)

// The config tests load with the runtime packages' checks, as cmd/herald does.
func init() { config.RuntimeChecks = runtimechecks.Checks() }

// Package config is the configuration of `herald serve`: its keys, their defaults, loading
// them from a file (YAML or TOML), the environment and flags, in that order, and validating
// the result once, with one error naming every field that is wrong and where its value came
// from. docs/configuration.md is the reference of every key, variable and flag.
//
// It imports none of herald's runtime packages: the checks only they can make (a template's
// syntax, a TLS file's content, a bus URL as the engines read it) are handed to Load
// (Checks), and cmd/herald turns the configuration into each component's options.
package config

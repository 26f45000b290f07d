package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald"
)

// storeHistoryYAML is the example of docs/app-stores.md (History rules for many apps).
const storeHistoryYAML = `
app_store:
  postgres:
    url: postgres://herald:secret@db:5432/herald
  history:
    - apps: "*"                  # every app of the table
      channels: "auction-*"
      size: 1000
      ttl: 10m
    - {apps: "tenant-*", channels: "presence-room-*", size: 100, ttl: 120}
`

// TestStoreHistoryConfig: app_store.history from YAML and TOML files, replaced whole by
// HERALD_APP_STORE_HISTORY, itself replaced by --app-store-history ("" for none).
func TestStoreHistoryConfig(t *testing.T) {
	want := []herald.AppsHistoryRule{
		{Apps: "*", HistoryRule: herald.HistoryRule{Channels: "auction-*", Size: 1000, TTL: 10 * time.Minute}},
		{Apps: "tenant-*", HistoryRule: herald.HistoryRule{Channels: "presence-room-*", Size: 100, TTL: 2 * time.Minute}},
	}
	c, err := load(t, []string{"--config", writeFile(t, "h.yaml", storeHistoryYAML)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.AppStore.HistoryRules(); !reflect.DeepEqual(got, want) {
		t.Errorf("from YAML: %+v, want %+v", got, want)
	}

	toml := `[app_store.postgres]
url = "postgres://herald:secret@db:5432/herald"

[[app_store.history]]
apps = "*"
channels = "auction-*"
size = 1000
ttl = "10m"

[[app_store.history]]
apps = "tenant-*"
channels = "presence-room-*"
size = 100
ttl = 120
`
	if c, err = load(t, []string{"--config", writeFile(t, "h.toml", toml)}, nil); err != nil {
		t.Fatal(err)
	}
	if got := c.AppStore.HistoryRules(); !reflect.DeepEqual(got, want) {
		t.Errorf("from TOML: %+v, want %+v", got, want)
	}

	env := map[string]string{"HERALD_APP_STORE_HISTORY": `[{"apps": "shop", "channels": "orders-*", "size": 5, "ttl": "1h"}]`}
	c, err = load(t, []string{"--config", writeFile(t, "h.yaml", storeHistoryYAML)}, env)
	if err != nil {
		t.Fatal(err)
	}
	envWant := []herald.AppsHistoryRule{{Apps: "shop", HistoryRule: herald.HistoryRule{Channels: "orders-*", Size: 5, TTL: time.Hour}}}
	if got := c.AppStore.HistoryRules(); !reflect.DeepEqual(got, envWant) {
		t.Errorf("from the environment over the file: %+v, want %+v", got, envWant)
	}

	c, err = load(t, []string{"--app-store-history", `[{apps: "*", channels: "*", size: 1, ttl: 30}]`},
		map[string]string{"HERALD_APP_STORE_POSTGRES_URL": "postgres://u:p@h/d", "HERALD_APP_STORE_HISTORY": env["HERALD_APP_STORE_HISTORY"]})
	if err != nil {
		t.Fatal(err)
	}
	flagWant := []herald.AppsHistoryRule{{Apps: "*", HistoryRule: herald.HistoryRule{Channels: "*", Size: 1, TTL: 30 * time.Second}}}
	if got := c.AppStore.HistoryRules(); !reflect.DeepEqual(got, flagWant) {
		t.Errorf("from the flag over the environment: %+v, want %+v", got, flagWant)
	}

	c, err = load(t, []string{"--config", writeFile(t, "h.yaml", storeHistoryYAML), "--app-store-history", ""}, nil)
	if err != nil || len(c.AppStore.History) != 0 {
		t.Errorf("--app-store-history \"\": %+v, %v; want no rule", c.AppStore.History, err)
	}
}

// TestStoreHistoryConfigErrors: each problem names its field (app_store.history[i].key) and
// where its value came from.
func TestStoreHistoryConfigErrors(t *testing.T) {
	pg := map[string]string{"HERALD_APP_STORE_POSTGRES_URL": "postgres://u:p@h/d"}
	for _, tc := range []struct {
		rules string
		env   map[string]string
		want  string
	}{
		{`[{channels: "a-*", size: 10, ttl: 1m}]`, pg, "app_store.history[0].apps: must name the apps by id"},
		{`[{apps: "a b", channels: "a-*", size: 10, ttl: 1m}]`, pg, `app_store.history[0].apps: "a b" holds a character no app id has`},
		{`[{apps: "*", size: 10, ttl: 1m}]`, pg, "app_store.history[0].channels: must name the channels"},
		{`[{apps: "*", channels: "a b*", size: 10, ttl: 1m}]`, pg, `app_store.history[0].channels: "a b*" holds a character no channel name has`},
		{`[{apps: "*", channels: "private-encrypted-*", size: 10, ttl: 1m}]`, pg, "app_store.history[0].channels: \"private-encrypted-*\": encrypted channels keep no history"},
		{`[{apps: "*", channels: "a-*", size: 10, ttl: 1m}, {apps: "*", channels: "a-*", size: 100001, ttl: 1m}]`, pg, "app_store.history[1].size: 100001 must be from 1 to 100000"},
		{`[{apps: "*", channels: "a-*", size: 10}]`, pg, "app_store.history[0].ttl: 0s must be more than 0 and at most 168h0m0s"},
		{`[{apps: "*", channels: "a-*", size: 10, ttl: 169h}]`, pg, "app_store.history[0].ttl: 169h0m0s must be more than 0 and at most 168h0m0s"},
		{`[{apps: "*", channels: "a-*", size: 10, ttl: 1m, sise: 3}]`, pg, "app_store.history[0].sise: unknown key"},
		{`[{apps: "*", channels: "a-*", size: ten, ttl: 1m}]`, pg, "app_store.history[0].size: "},
		{`{apps: "*"}`, pg, "app_store.history: "},
		{`[{apps: "*", channels: "a-*", size: 10, ttl: 1m}]`, nil, "app_store.history: applies to the apps of an app store"},
	} {
		env := map[string]string{"HERALD_APP_STORE_HISTORY": tc.rules}
		for k, v := range tc.env {
			env[k] = v
		}
		_, err := load(t, nil, env)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "(from env HERALD_APP_STORE_HISTORY)") {
			t.Errorf("%s: got %v, want an error with %q from env HERALD_APP_STORE_HISTORY", tc.rules, err, tc.want)
		}
	}
	yaml := "app_store:\n  postgres: {url: \"postgres://u:p@h/d\"}\n  history:\n    - {apps: \"*\", channels: \"a-*\", size: 0, ttl: 1m}\n"
	path := writeFile(t, "h.yaml", yaml)
	if _, err := load(t, []string{"--config", path}, nil); err == nil || !strings.Contains(err.Error(), "app_store.history[0].size: 0 must be from 1 to 100000 (from file "+path+")") {
		t.Errorf("from the file: %v", err)
	}
	if _, err := load(t, []string{"--app-store-history", "[{apps: '*'", "--app-store-postgres-url", "postgres://u:p@h/d"}, nil); err == nil ||
		!strings.Contains(err.Error(), "app_store.history: want a list such as") || !strings.Contains(err.Error(), "(from flag --app-store-history)") {
		t.Errorf("a flag that does not parse: %v", err)
	}
}

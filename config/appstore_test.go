package config

import (
	"strings"
	"testing"
	"time"
)

// TestAppStoreConfig: app_store.* from the file (nested tables, YAML and TOML), the
// environment and flags; with a database there is no development app.
func TestAppStoreConfig(t *testing.T) {
	yaml := writeFile(t, "h.yaml", "app_store:\n  postgres:\n    url: postgres://herald:pw@db:5432/herald\n    install_trigger: true\n  table: apps\n  refresh: 2s\n")
	c, err := load(t, []string{"--config", yaml}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := c.AppStore
	if s.Postgres.URL != "postgres://herald:pw@db:5432/herald" || !s.Postgres.InstallTrigger || s.Table != "apps" || s.Refresh.Duration != 2*time.Second {
		t.Errorf("from YAML: %+v", s)
	}
	if len(c.Apps) != 0 || c.UsedDefaultApp() {
		t.Errorf("with a database the apps are %+v, want none (not the development app)", c.Apps)
	}

	toml := writeFile(t, "h.toml", "[app_store.mysql]\ndsn = \"herald:pw@tcp(db:3306)/herald\"\n[app_store]\ntable = \"applications\"\n")
	if c, err = load(t, []string{"--config", toml}, nil); err != nil {
		t.Fatal(err)
	}
	if c.AppStore.MySQL.DSN != "herald:pw@tcp(db:3306)/herald" || c.AppStore.Table != "applications" || c.AppStore.Refresh.Duration != 5*time.Second {
		t.Errorf("from TOML: %+v", c.AppStore)
	}

	c, err = load(t, []string{"--app-store-refresh", "750ms"}, map[string]string{"HERALD_APP_STORE_POSTGRES_URL": "postgres://u:p@h/d", "HERALD_APP_STORE_TABLE": "tenants"})
	if err != nil {
		t.Fatal(err)
	}
	if c.AppStore.Postgres.URL != "postgres://u:p@h/d" || c.AppStore.Table != "tenants" || c.AppStore.Refresh.Duration != 750*time.Millisecond {
		t.Errorf("from the environment and flags: %+v", c.AppStore)
	}

	c, err = load(t, nil, nil)
	if err != nil || c.AppStore.On() || len(c.Apps) != 1 {
		t.Errorf("without app_store: store on %v, apps %+v, err %v; want the development app", c.AppStore.On(), c.Apps, err)
	}
}

// TestAppStoreConfigErrors: each problem names its field and never quotes a password.
func TestAppStoreConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		file string
		want []string
	}{
		{"both databases", map[string]string{"HERALD_APP_STORE_POSTGRES_URL": "postgres://u:secretpw@h/d", "HERALD_APP_STORE_MYSQL_DSN": "u:secretpw@tcp(h:3306)/d"}, "",
			[]string{"app_store.mysql.dsn: set app_store.postgres.url or app_store.mysql.dsn, not both (from env HERALD_APP_STORE_MYSQL_DSN)"}},
		{"bad url", map[string]string{"HERALD_APP_STORE_POSTGRES_URL": "postgres://u:secretpw@h:notaport/d"}, "", []string{"app_store.postgres.url: cannot parse it"}},
		{"bad dsn", map[string]string{"HERALD_APP_STORE_MYSQL_DSN": "u:secretpw@h:3306/d"}, "", []string{"app_store.mysql.dsn: cannot parse the DSN"}},
		{"bad table", map[string]string{"HERALD_APP_STORE_MYSQL_DSN": "u:p@tcp(h:3306)/d", "HERALD_APP_STORE_TABLE": "apps; drop"}, "", []string{`app_store.table: "apps; drop"`}},
		{"short refresh", map[string]string{"HERALD_APP_STORE_MYSQL_DSN": "u:p@tcp(h:3306)/d", "HERALD_APP_STORE_REFRESH": "10ms"}, "", []string{"app_store.refresh: 10ms must be at least 100ms"}},
		{"trigger without postgres", map[string]string{"HERALD_APP_STORE_POSTGRES_INSTALL_TRIGGER": "true"}, "", []string{"app_store.postgres.install_trigger: needs app_store.postgres.url"}},
		{"apps and a database", map[string]string{"HERALD_APP_STORE_MYSQL_DSN": "u:p@tcp(h:3306)/d"}, "apps:\n  - {id: a, key: a, secret: s}\n",
			[]string{"apps: with app_store set the apps are the database's"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var args []string
			if tc.file != "" {
				args = []string{"--config", writeFile(t, "h.yaml", tc.file)}
			}
			_, err := load(t, args, tc.env)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "secretpw") {
				t.Errorf("error %q quotes the password", err)
			}
		})
	}
}

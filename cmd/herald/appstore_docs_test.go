package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/servicetest"
)

// newDatabaseHeading is the section of docs/app-stores.md that TestDocAppStoreNewDatabase runs.
const newDatabaseHeading = "### A new database: herald's table"

// docSection returns the text of page from heading to the next heading of its level or above.
func docSection(t *testing.T, page, heading string) string {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no heading %q", page, heading)
	}
	for _, end := range []string{"\n## ", "\n### "} {
		if i := strings.Index(rest, end); i >= 0 {
			rest = rest[:i]
		}
	}
	return rest
}

// codeBlocks returns the section's ```lang blocks, in order.
func codeBlocks(section, lang string) []string {
	var out []string
	for _, part := range strings.Split(section, "```"+lang+"\n")[1:] {
		block, _, _ := strings.Cut(part, "```")
		out = append(out, block)
	}
	return out
}

// TestDocAppStoreNewDatabase runs docs/app-stores.md's "A new database" against a real
// PostgreSQL as a reader would: the role and the database made with the two documented
// commands' SQL (under other names: the test server's superuser is already called herald),
// herald's table and the INSERT as written, run as that role in that database; then herald,
// pointed at it, serves the app: its key connects and its secret signs a publish the client
// receives. The apps API creates an app in the same table (with every column herald writes:
// its switches, origins and history rules), whose key connects too.
func TestDocAppStoreNewDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts PostgreSQL and a node")
	}
	section := docSection(t, "../../docs/app-stores.md", newDatabaseHeading)
	shell := codeBlocks(section, "sh")
	sql := codeBlocks(section, "sql")
	if len(shell) != 1 || len(sql) != 2 {
		t.Fatalf("the section has %d sh and %d sql blocks, want 1 and 2:\n%s", len(shell), len(sql), section)
	}
	// The role and the database: the SQL of each `psql -c "..."` line, one a line.
	psql := regexp.MustCompile(`(?m)^sudo -u postgres psql -c "([^"]+)"$`)
	setup := psql.FindAllStringSubmatch(shell[0], -1)
	if len(setup) != 2 || strings.Count(strings.TrimSpace(shell[0]), "\n") != 1 {
		t.Fatalf("want two lines of `sudo -u postgres psql -c \"...\"`, one for the role and one for the database:\n%s", shell[0])
	}
	schema, insert := sql[0], sql[1]
	app := &herald.App{ID: "my-app", Key: "my-app-key", Secret: "my-app-secret"}
	for _, want := range []string{"'" + app.ID + "'", "'" + app.Key + "'", "'" + app.Secret + "'"} {
		if !strings.Contains(insert, want) {
			t.Fatalf("the INSERT does not give %s:\n%s", want, insert)
		}
	}
	if !strings.Contains(section, "postgres://herald:secret@localhost:5432/herald") {
		t.Fatalf("the section does not give the URL of the role and database it makes")
	}

	pg := servicetest.Postgres(t)
	rename := regexp.MustCompile(`\bherald\b`) // the role's and the database's name
	for _, m := range setup {
		pgRun(t, pg.PostgresURL(), rename.ReplaceAllString(m[1], "docs_herald"))
	}
	url := fmt.Sprintf("postgres://docs_herald:secret@%s/docs_herald?sslmode=disable", pg.Addr())
	pgRun(t, url, schema)
	pgRun(t, url, insert)

	n := startServe(t, "docs", "--app-store-postgres-url", url, "--app-store-postgres-install-trigger", "--console-token", apiToken)
	until(t, "the node up with the documented table's one app", func() bool {
		h := n.storeHealth(t)
		return h.Status == "ok" && h.AppStore != nil && h.AppStore.Up && h.AppStore.Apps == 1
	})
	c, code := dialKey(t, n, app.Key)
	if c == nil {
		t.Fatalf("%s refused with %d", app.Key, code)
	}
	if err := c.Subscribe("docs-channel", "", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Expect("pusher_internal:subscription_succeeded", clusterWait); err != nil {
		t.Fatal(err)
	}
	publishApp(t, n, app, "docs-channel", "hello")
	m, err := c.Expect("tick", clusterWait)
	if err != nil {
		t.Fatal(err)
	}
	if m.Channel != "docs-channel" || !strings.Contains(string(m.Data), "hello") {
		t.Fatalf("the event: %+v", m)
	}

	code, created := call(t, n, "POST", "/console/api/apps", `{"id":"made-by-api","enable_client_messages":true,`+
		`"enable_subscription_count_event":true,"allowed_origins":["https://shop.example"],`+
		`"history":[{"channels":"auction-*","size":100,"ttl":"10m"}]}`, true)
	if code != 201 || created["key"] == nil {
		t.Fatalf("the apps API creating an app in the documented table: %d %v", code, created)
	}
	if c, code := dialKey(t, n, created["key"].(string)); c == nil {
		t.Fatalf("the app the API created: refused with %d", code)
	}
	if h := n.storeHealth(t); h.AppStore == nil || h.AppStore.Apps != 2 {
		t.Fatalf("after the API's app: %+v", h.AppStore)
	}
}

// pgRun runs sql, which may hold several statements, on the database at url.
func pgRun(t *testing.T, url, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterWait)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	// The simple protocol runs a script of several statements, as psql does.
	if _, err := c.PgConn().Exec(ctx, sql).ReadAll(); err != nil {
		t.Fatalf("%s\n%v", sql, err)
	}
}

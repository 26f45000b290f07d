// Command postgres runs one PostgreSQL server for the test suites that are not Go (test/js),
// started exactly as the Go tests start theirs (servicetest.StartPostgres: Debian's
// postgresql, a free loopback port, a temporary directory, a database "herald"). Once it
// answers it prints one line, {"url":"postgres://..."}, and it runs until its standard input
// closes (the test process ended, however it ended) or it gets SIGTERM or SIGINT; then it
// stops the server by its pid and removes its files. It exits 1 on any failure.
//
// With -soketi-table it first creates the table "apps" exactly as Soketi's documentation
// creates it, empty; with -history-column too, it then adds herald's history column as
// docs/app-stores.md does.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-rt/herald/internal/servicetest"
)

// soketiTable is Soketi's PostgreSQL apps table.
const soketiTable = `CREATE TABLE IF NOT EXISTS apps (
    id varchar(255) PRIMARY KEY,
    "key" varchar(255) NOT NULL,
    secret varchar(255) NOT NULL,
    max_connections integer NOT NULL,
    enable_client_messages smallint NOT NULL,
    "enabled" smallint NOT NULL,
    max_backend_events_per_sec integer NOT NULL,
    max_client_events_per_sec integer NOT NULL,
    max_read_req_per_sec integer NOT NULL,
    max_presence_members_per_channel integer DEFAULT NULL,
    max_presence_member_size_in_kb integer DEFAULT NULL,
    max_channel_name_length integer DEFAULT NULL,
    max_event_channels_at_once integer DEFAULT NULL,
    max_event_name_length integer DEFAULT NULL,
    max_event_payload_in_kb integer DEFAULT NULL,
    max_event_batch_size integer DEFAULT NULL,
    webhooks json,
    enable_user_authentication smallint NOT NULL
)`

func main() {
	soketi := flag.Bool("soketi-table", false, "create Soketi's apps table")
	history := flag.Bool("history-column", false, "with -soketi-table: add herald's history column")
	flag.Parse()
	db, err := servicetest.StartPostgres()
	if err != nil {
		fmt.Fprintln(os.Stderr, "postgres:", err)
		os.Exit(1)
	}
	defer db.Close()
	if *soketi {
		if err := create(db.PostgresURL(), *history); err != nil {
			fmt.Fprintln(os.Stderr, "postgres: creating the apps table:", err)
			db.Close()
			os.Exit(1) // exits without the deferred Close: it ran above
		}
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	line, _ := json.Marshal(map[string]string{"url": db.PostgresURL()})
	if _, err := fmt.Println(string(line)); err != nil {
		return
	}
	select {
	case <-stop:
	case <-eof:
	}
}

// historyColumn is herald's history column, added as docs/app-stores.md adds it.
const historyColumn = "ALTER TABLE apps ADD COLUMN history jsonb"

func create(url string, history bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	if _, err = c.Exec(ctx, soketiTable); err != nil || !history {
		return err
	}
	_, err = c.Exec(ctx, historyColumn)
	return err
}

package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald/internal/servicetest"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/webhook"
)

// hookReceiver is a webhook endpoint that keeps each event it receives as "app channel
// event", and fails the test on a request not signed with its app's secret.
type hookReceiver struct {
	t       *testing.T
	secrets map[string]string // app key -> secret
	mu      sync.Mutex
	got     []string
	srv     *httptest.Server
}

func newHookReceiver(t *testing.T, secrets map[string]string) *hookReceiver {
	r := &hookReceiver{t: t, secrets: secrets}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		key := req.Header.Get("X-Pusher-Key")
		secret, ok := r.secrets[key]
		if !ok || req.Header.Get("X-Pusher-Signature") != webhook.Sign(secret, b) {
			r.t.Errorf("a webhook request with key %q is not signed with its app's secret", key)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var d struct {
			Events []struct{ Name, Channel string }
		}
		if err := json.Unmarshal(b, &d); err != nil {
			r.t.Errorf("webhook body %s: %v", b, err)
		}
		r.mu.Lock()
		for _, e := range d.Events {
			r.got = append(r.got, key+" "+e.Channel+" "+e.Name)
		}
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *hookReceiver) has(event string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range r.got {
		if g == event {
			return true
		}
	}
	return false
}

// hooksDB is a database holding Soketi's apps table, for TestAppStoreWebhooks.
type hooksDB struct {
	exec  func(t *testing.T, q string)
	quote func(string) string
	flags []string
}

// TestAppStoreWebhooks: on PostgreSQL and on MariaDB, an app inserted into Soketi's table with
// Soketi's webhooks column has its channel_occupied and channel_vacated posted, signed with
// its secret; a new URL in the column takes the next events within the refresh; a deleted app
// leaves the sender (its metrics go) and, inserted again without webhooks, sends nothing.
func TestAppStoreWebhooks(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts PostgreSQL, MariaDB and a node on each")
	}
	t.Run("postgres", func(t *testing.T) {
		url := servicetest.Postgres(t).PostgresURL()
		db := hooksDB{exec: func(t *testing.T, q string) { pgExec(t, url, q) }, quote: func(n string) string { return `"` + n + `"` },
			flags: []string{"--app-store-postgres-url", url, "--app-store-postgres-install-trigger", "--app-store-refresh", "1s"}}
		db.exec(t, soketiPostgres)
		appStoreWebhooks(t, db)
	})
	t.Run("mariadb", func(t *testing.T) {
		srv := servicetest.MariaDB(t)
		conn, err := sql.Open("mysql", srv.MySQLDSN())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		db := hooksDB{exec: func(t *testing.T, q string) {
			t.Helper()
			if _, err := conn.ExecContext(context.Background(), q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}, quote: func(n string) string { return "`" + n + "`" },
			flags: []string{"--app-store-mysql-dsn", srv.MySQLDSN(), "--app-store-refresh", "300ms"}}
		db.exec(t, soketiMySQL)
		appStoreWebhooks(t, db)
	})
}

func appStoreWebhooks(t *testing.T, db hooksDB) {
	secrets := map[string]string{"w1-key": "w1-secret", "w2-key": "w2-secret"}
	first, second := newHookReceiver(t, secrets), newHookReceiver(t, secrets)
	insert := func(id, hooks string) {
		db.exec(t, fmt.Sprintf(`INSERT INTO apps (id, %s, secret, max_connections, enable_client_messages, %s, max_backend_events_per_sec,
			max_client_events_per_sec, max_read_req_per_sec, webhooks, enable_user_authentication)
			VALUES ('%[3]s', '%[3]s-key', '%[3]s-secret', -1, 1, 1, -1, -1, -1, %[4]s, 0)`, db.quote("key"), db.quote("enabled"), id, hooks))
	}
	soketiHooks := func(url string) string {
		return fmt.Sprintf(`'[{"url": "%s", "event_types": ["channel_occupied", "channel_vacated"]}]'`, url)
	}
	n := startServe(t, "hooks", append(db.flags, "--webhooks-leave-delay", "0", "--webhooks-batch-interval", "20ms")...)
	until(t, "the node up with the app store", func() bool {
		h := n.storeHealth(t)
		return h.Status == "ok" && h.AppStore != nil && h.AppStore.Up
	})

	insert("w1", soketiHooks(first.srv.URL))
	c1 := dialUntil(t, n, "w1-key")
	// The node may let the key connect a moment before its webhooks are attached: channels
	// are occupied until one is posted.
	news := occupyUntil(t, c1, first, "w1-key", "news")
	if err := c1.WriteJSON(map[string]any{"event": "pusher:unsubscribe", "data": map[string]string{"channel": news}}); err != nil {
		t.Fatal(err)
	}
	until(t, "channel_vacated at the first URL", func() bool { return first.has("w1-key " + news + " channel_vacated") })

	// The URL changes: within the refresh, a channel occupied is posted to the new one only.
	db.exec(t, fmt.Sprintf("UPDATE apps SET webhooks = %s WHERE id = 'w1'", soketiHooks(second.srv.URL)))
	occupyUntil(t, c1, second, "w1-key", "probe")
	subscribeTo(t, c1, "moved")
	until(t, "the next event at the new URL", func() bool { return second.has("w1-key moved channel_occupied") })
	if first.has("w1-key moved channel_occupied") {
		t.Fatal("an event after the URL changed was posted to the old URL")
	}

	// Deleted: its connection closes with 4001 and it leaves the sender.
	db.exec(t, "DELETE FROM apps WHERE id = 'w1'")
	if code, err := c1.ExpectClose(clusterWait); err != nil || code != 4001 {
		t.Fatalf("the deleted app's connection: close %d, %v; want 4001", code, err)
	}
	until(t, "the deleted app's webhook metrics gone", func() bool {
		m := n.scrape()
		return m != "" && !strings.Contains(m, `webhook_events_sent_total{app_id="w1"}`)
	})
	// Inserted again without webhooks it sends nothing, while another app's are sent.
	insert("w1", "NULL")
	insert("w2", soketiHooks(second.srv.URL))
	again, other := dialUntil(t, n, "w1-key"), dialUntil(t, n, "w2-key")
	subscribeTo(t, again, "after-delete")
	occupyUntil(t, other, second, "w2-key", "other")
	if first.has("w1-key after-delete channel_occupied") || second.has("w1-key after-delete channel_occupied") {
		t.Fatal("an app deleted and inserted again without webhooks still sends them")
	}
	if err := n.stop(); err != nil {
		t.Error(err)
	}
}

// dialUntil connects with key once the node knows it.
func dialUntil(t *testing.T, n *node, key string) *wstest.Client {
	t.Helper()
	var c *wstest.Client
	until(t, key+" to connect", func() bool { c, _ = dialKey(t, n, key); return c != nil })
	return c
}

// occupyUntil subscribes c to channels prefix-1, prefix-2, ... until r has the
// channel_occupied of one of them, which it returns.
func occupyUntil(t *testing.T, c *wstest.Client, r *hookReceiver, key, prefix string) string {
	t.Helper()
	var channel string
	for i := 1; ; i++ {
		channel = fmt.Sprintf("%s-%d", prefix, i)
		subscribeTo(t, c, channel)
		got := false
		// A little while for each channel, then the next: the webhook posts within its batch.
		for range 25 {
			if got = r.has(key + " " + channel + " channel_occupied"); got {
				return channel
			}
			time.Sleep(20 * time.Millisecond) // polling interval
		}
		if i*25*20 > int(clusterWait.Milliseconds()) {
			t.Fatalf("no channel_occupied of %s-* posted for %s within %v", prefix, key, clusterWait)
		}
	}
}

// subscribeTo subscribes c to a public channel and waits for the answer.
func subscribeTo(t *testing.T, c *wstest.Client, channel string) {
	t.Helper()
	if err := c.Subscribe(channel, "", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Expect("pusher_internal:subscription_succeeded", clusterWait); err != nil {
		t.Fatalf("subscribe %s: %v", channel, err)
	}
}

// scrape is the node's /metrics ("" when it does not answer).
func (n *node) scrape() string {
	resp, err := n.client.Get("http://" + n.metrics + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald/webhook"
)

// The example of docs/configuration.md (Webhooks), with a second URL and the timing settings.
const webhooksYAML = `
apps:
  - id: app-id
    key: app-key
    secret: app-secret
    webhooks:
      - url: https://backend.example/pusher/webhooks
        event_types: [channel_occupied, channel_vacated, member_added, member_removed, client_event]
        filter: {channel_name_starts_with: "", channel_name_ends_with: ""}
        headers: {X-Extra: value}
      - url: http://127.0.0.1:9000/hooks
        filter: {channel_name_starts_with: presence-}
webhooks:
  leave_delay: 5s
  retry_for: 10m
`

const webhooksTOML = `
[webhooks]
leave_delay = "5s"
retry_for = "10m"

[[apps]]
id = "app-id"
key = "app-key"
secret = "app-secret"

[[apps.webhooks]]
url = "https://backend.example/pusher/webhooks"
event_types = ["channel_occupied", "channel_vacated", "member_added", "member_removed", "client_event"]
filter = {channel_name_starts_with = "", channel_name_ends_with = ""}
headers = {X-Extra = "value"}

[[apps.webhooks]]
url = "http://127.0.0.1:9000/hooks"
filter = {channel_name_starts_with = "presence-"}
`

func TestLoadConfigWebhooks(t *testing.T) {
	want := []AppWebhook{
		{URL: "https://backend.example/pusher/webhooks", Headers: map[string]string{"X-Extra": "value"},
			EventTypes: []string{"channel_occupied", "channel_vacated", "member_added", "member_removed", "client_event"}},
		{URL: "http://127.0.0.1:9000/hooks", Filter: WebhookFilter{ChannelNameStartsWith: "presence-"}},
	}
	for name, content := range map[string]string{"c.yaml": webhooksYAML, "c.toml": webhooksTOML} {
		c, err := load(t, []string{"--config", writeFile(t, name, content)}, map[string]string{"HERALD_WEBHOOKS_QUEUE_SIZE": "50"})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := c.Apps[0].Webhooks; !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\n got %+v\nwant %+v", name, got, want)
		}
		w := defaultWebhooks()
		w.LeaveDelay, w.RetryFor, w.QueueSize = Duration{5 * time.Second}, Duration{10 * time.Minute}, 50
		if c.Webhooks != w {
			t.Fatalf("%s: webhooks %+v, want %+v", name, c.Webhooks, w)
		}
		apps := c.HeraldApps()
		if len(apps) != 1 || apps[0].Secret != "app-secret" || len(apps[0].Webhooks) != 2 || apps[0].Webhooks[1].Filter.ChannelNameStartsWith != "presence-" {
			t.Fatalf("webhook apps %+v", apps)
		}
	}
	if d := defaultWebhooks(); d.RetryFor.Duration < 5*time.Minute {
		t.Fatalf("default retry_for %v: a backend outage of 5 min must lose nothing", d.RetryFor)
	}
	c, err := load(t, []string{"--webhooks-leave-delay", "0"}, nil)
	if err != nil || c.Webhooks.LeaveDelay.Duration != 0 {
		t.Fatalf("leave_delay 0: %v %v", err, c.Webhooks.LeaveDelay)
	}
}

func TestLoadConfigWebhookProblems(t *testing.T) {
	app := "apps: [{id: a, key: k, secret: s, webhooks: [%s]}]"
	for _, tc := range []struct{ name, hook, want string }{
		{"bad url", "{url: 'ftp://x/y'}", `apps[0].webhooks[0].url: "ftp://x/y": want an http:// or https:// URL (from file `},
		{"no url", "{event_types: [client_event]}", `apps[0].webhooks[0].url: must not be empty (from file `},
		{"unknown event type", "{url: 'http://h/', event_types: [client_event, channel_exploded]}",
			`apps[0].webhooks[0].event_types[1]: "channel_exploded" is not one of channel_occupied, channel_vacated, member_added, member_removed, client_event, cache_miss, subscription_count (from file `},
		{"bad header", "{url: 'http://h/', headers: {'X Bad': v}}", `apps[0].webhooks[0].headers.X Bad: "X Bad" is not a valid header name (from file `},
		{"our header", "{url: 'http://h/', headers: {X-Pusher-Signature: v}}", `apps[0].webhooks[0].headers.X-Pusher-Signature: X-Pusher-Signature is set by herald (from file `},
		{"unknown filter key", "{url: 'http://h/', filter: {channel_name_contains: x}}", `apps[0].webhooks[0].filter.channel_name_contains: unknown key (from file `},
		{"unknown key", "{url: 'http://h/', retries: 3}", `apps[0].webhooks[0].retries: unknown key (from file `},
		{"not a list", "", ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			content := strings.Replace(app, "%s", tc.hook, 1)
			want := tc.want
			if tc.name == "not a list" {
				content, want = "apps: [{id: a, key: k, secret: s, webhooks: {url: x}}]", "apps[0].webhooks: line 1: want a list (from file "
			}
			_, err := load(t, []string{"--config", writeFile(t, "c.yaml", content)}, nil)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v\nwant it to contain %q", err, want)
			}
		})
	}
	_, err := load(t, []string{"--webhooks-retry-for", "0", "--webhooks-queue-size", "0"}, nil)
	for _, want := range []string{"webhooks.retry_for: 0s must be positive (from flag --webhooks-retry-for)",
		"webhooks.queue_size: 0 must be at least 1 (from flag --webhooks-queue-size)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v\nwant it to contain %q", err, want)
		}
	}
}

// FuzzLoadConfigWebhooks: apps[].webhooks in YAML and TOML never crash the loader, and what it
// accepts is valid.
func FuzzLoadConfigWebhooks(f *testing.F) {
	f.Add([]byte(webhooksYAML), false)
	f.Add([]byte(webhooksTOML), true)
	f.Add([]byte("apps: [{id: a, key: k, secret: s, webhooks: [{url: 'http://h/', headers: {a: [1]}, filter: [1], event_types: x}]}]"), false)
	f.Add([]byte("[[apps]]\nid='a'\nkey='k'\nsecret='s'\nwebhooks=[{url=1, headers={a={b=1}}}]\n"), true)
	f.Fuzz(func(t *testing.T, data []byte, toml bool) {
		name := "fuzz.yaml"
		if toml {
			name = "fuzz.toml"
		}
		c, err := load(t, []string{"--config", writeFile(t, name, string(data))}, nil)
		if err != nil {
			return
		}
		for _, a := range c.Apps {
			for _, h := range a.Webhooks {
				if webhook.CheckURL(h.URL) != nil {
					t.Fatalf("bad URL accepted: %q", h.URL)
				}
				for _, e := range h.EventTypes {
					if webhook.CheckEventType(e) != nil {
						t.Fatalf("bad event type accepted: %q", e)
					}
				}
			}
		}
	})
}

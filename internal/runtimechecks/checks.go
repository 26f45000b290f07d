// Package runtimechecks is the configuration checks only herald's runtime packages can make
// (config.Checks), in one place: cmd/herald hands them to config.Load, and config's tests
// load with them. config itself imports no runtime package (layers_test.go).
package runtimechecks

import (
	"github.com/herald-rt/herald/appstore/mysql"
	"github.com/herald-rt/herald/appstore/postgres"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/config"
	"github.com/herald-rt/herald/guard"
	"github.com/herald-rt/herald/ingest"
	"github.com/herald-rt/herald/internal/busurl"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/webhook"
)

// Checks are the configuration checks the runtime packages make.
func Checks() config.Checks {
	return config.Checks{
		TLSFiles: func(ca, cert, key string) error {
			_, err := broker.TLSFiles{CA: ca, Cert: cert, Key: key}.Config("")
			return err
		},
		BusPrefix: broker.ValidPrefix,
		MySQLDSN:  mysql.CheckDSN,
		TableName: func(pg bool, name string) bool {
			if pg {
				return postgres.ValidName(name)
			}
			return mysql.ValidName(name)
		},
		Origins: func(o []string) error { _, err := guard.ParseOrigins(o); return err },
		Template: func(v string) (string, bool, error) {
			t, err := ingest.ParseTemplate(v)
			if err != nil {
				return "", false, err
			}
			lit, ok := t.Literal()
			return lit, ok, nil
		},
		AllowsChannel: ingest.AllowsChannel,
		ChannelName:   pusher.ValidateChannelName,
		EventName:     pusher.ValidateEventName,
		WebhookURL:    webhook.CheckURL,
		WebhookEvent:  webhook.CheckEventType,
		WebhookHeader: webhook.CheckHeader,
		BusURL: func(raw string) (string, bool, error) {
			u, err := busurl.Parse(raw)
			return u.Engine, u.TLS, err
		},
	}
}

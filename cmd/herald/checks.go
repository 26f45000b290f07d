package main

import (
	"github.com/herald-rt/herald/appstore/mysql"
	"github.com/herald-rt/herald/appstore/postgres"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/guard"
	"github.com/herald-rt/herald/ingest"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/webhook"
)

// runtimeChecks are the configuration checks the runtime packages make (config_checks.go).
func runtimeChecks() checks {
	return checks{
		tlsFiles: func(ca, cert, key string) error {
			_, err := broker.TLSFiles{CA: ca, Cert: cert, Key: key}.Config("")
			return err
		},
		busPrefix: broker.ValidPrefix,
		mysqlDSN:  mysql.CheckDSN,
		tableName: func(pg bool, name string) bool {
			if pg {
				return postgres.ValidName(name)
			}
			return mysql.ValidName(name)
		},
		origins: func(o []string) error { _, err := guard.ParseOrigins(o); return err },
		template: func(v string) (string, bool, error) {
			t, err := ingest.ParseTemplate(v)
			if err != nil {
				return "", false, err
			}
			lit, ok := t.Literal()
			return lit, ok, nil
		},
		allowsChannel: ingest.AllowsChannel,
		channelName:   pusher.ValidateChannelName,
		eventName:     pusher.ValidateEventName,
		webhookURL:    webhook.CheckURL,
		webhookEvent:  webhook.CheckEventType,
		webhookHeader: webhook.CheckHeader,
		busURL:        parseBusURL,
	}
}

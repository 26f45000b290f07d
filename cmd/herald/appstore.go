package main

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/appstore"
	"github.com/herald-rt/herald/appstore/mysql"
	"github.com/herald-rt/herald/appstore/postgres"
	"github.com/herald-rt/herald/config"
	"github.com/herald-rt/herald/console"
	"github.com/herald-rt/herald/httpapi"
	"github.com/herald-rt/herald/metrics"
	"github.com/herald-rt/herald/session"
)

// appStore is where the node's apps come from: the file and the environment (a fixed
// herald.StaticApps), or a database table (app_store.*: an appstore.Store, which reads the
// table at start and keeps it fresh). It starts first, before everything that looks apps
// up, and stops last but for the memory guard.
type appStore struct {
	cfg    config.AppStoreConfig
	static *herald.StaticApps // without a database
	store  *appstore.Store    // with one
	log    *slog.Logger

	srv   atomic.Pointer[session.Server]           // told of every change, once watch attaches it
	hooks atomic.Pointer[func([]herald.AppChange)] // told of every change (before srv), once follow sets it: the webhooks
}

func newAppStore(cfg config.Config, log *slog.Logger) *appStore {
	a := &appStore{cfg: cfg.AppStore, log: log}
	if !cfg.AppStore.On() {
		a.static = herald.NewStaticApps(cfg.HeraldApps())
		return a
	}
	a.store = appstore.New(appstore.Config{Kind: cfg.AppStore.Kind(), Refresh: cfg.AppStore.Refresh.Duration, Log: log,
		OnChange: a.changed})
	return a
}

// apps is the node's herald.AppStore.
func (a *appStore) apps() herald.AppStore {
	if a.store != nil {
		return a.store
	}
	return a.static
}

// start connects to the database and reads the table (failing the start when it cannot).
func (a *appStore) start() error {
	if a.store == nil {
		return nil
	}
	a.warnUnencrypted()
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.Refresh.Duration+10e9)
	defer cancel()
	var src appstore.Source
	var err error
	if a.cfg.Postgres.URL != "" {
		src, err = postgres.Open(ctx, postgres.Config{URL: a.cfg.Postgres.URL, Table: a.cfg.Table, InstallTrigger: a.cfg.Postgres.InstallTrigger})
	} else {
		src, err = mysql.Open(ctx, mysql.Config{DSN: a.cfg.MySQL.DSN, Table: a.cfg.Table})
	}
	if err == nil {
		err = a.store.Start(src)
	}
	if err != nil {
		a.log.Error("app store", "kind", a.cfg.Kind(), "table", a.cfg.Table, "err", err)
		return err
	}
	a.log.Info("app store", "kind", a.cfg.Kind(), "table", a.cfg.Table, "apps", len(a.store.Apps()),
		"refresh", a.cfg.Refresh.Duration, "notifications", a.cfg.Postgres.URL != "")
	return nil
}

// warnUnencrypted warns of a database off this machine that the node may reach without TLS:
// the apps' secrets, and the database's password, would cross the network in clear.
func (a *appStore) warnUnencrypted() {
	var hosts []string
	how := "set sslmode=verify-full in app_store.postgres.url (docs/app-stores.md)"
	if a.cfg.Postgres.URL != "" {
		hosts, _ = postgres.Unencrypted(a.cfg.Postgres.URL) // parsed at validation already
	} else {
		hosts, _ = mysql.Unencrypted(a.cfg.MySQL.DSN)
		how = "add tls=true to app_store.mysql.dsn (docs/app-stores.md)"
	}
	if len(hosts) > 0 {
		a.log.Warn("app store: the database is on another host and may be reached without TLS: the apps' secrets and the database's password would cross the network in clear; "+how,
			"kind", a.cfg.Kind(), "hosts", hosts)
	}
}

// stop stops reading the table.
func (a *appStore) stop(context.Context) error {
	if a.store != nil {
		a.store.Close()
	}
	return nil
}

// watch attaches the server, once started (a serverWatcher): from then on it is told of every
// change, and now of every app as the store has it (a change between the server's start and
// this would otherwise be missed).
func (a *appStore) watch(h *session.Server) {
	if a.store == nil {
		return
	}
	a.srv.Store(h)
	var all []herald.AppChange
	for _, app := range a.store.Apps() {
		all = append(all, herald.AppChange{New: app})
	}
	h.AppsChanged(all)
	if f := a.hooks.Load(); f != nil {
		(*f)(all)
	}
}

// follow tells f of every change from now on, before the server (and of every app once more
// at watch); without a database nothing changes.
func (a *appStore) follow(f func([]herald.AppChange)) {
	if a.store != nil {
		a.hooks.Store(&f)
	}
}

// changed is the store's OnChange: the server applies the changes (and closes the
// connections of the apps disabled or deleted); each is logged.
func (a *appStore) changed(changes []herald.AppChange) {
	for _, c := range changes {
		switch {
		case c.Old == nil:
			a.log.Info("app added", "app_id", c.New.ID, "key", c.New.Key, "disabled", c.New.Disabled)
		case c.New == nil:
			a.log.Info("app deleted: closing its connections with 4001", "app_id", c.Old.ID)
		case c.New.Disabled && !c.Old.Disabled:
			a.log.Info("app disabled: closing its connections with 4003", "app_id", c.New.ID)
		default:
			a.log.Info("app changed", "app_id", c.New.ID, "disabled", c.New.Disabled)
		}
	}
	// The webhooks first: a deleted app's are detached before the server closes its
	// connections, so that the leaves of the closing are not sent for an app that is gone.
	if f := a.hooks.Load(); f != nil {
		(*f)(changes)
	}
	if h := a.srv.Load(); h != nil {
		h.AppsChanged(changes)
	}
}

// health is the app store's part of /health; nil without a database.
func (a *appStore) health() *httpapi.AppStoreHealth {
	if a.store == nil {
		return nil
	}
	st := a.store.Status()
	return &httpapi.AppStoreHealth{Kind: st.Kind, Up: st.Up, Listening: st.Listening, Apps: st.Apps,
		LastSync: st.LastSync, LastError: st.LastError}
}

// export publishes the store's state as metrics.
func (a *appStore) export(reg *metrics.Registry, prefix string) {
	if a.store == nil {
		return
	}
	s := a.store
	up := func() float64 {
		if s.Status().Up {
			return 1
		}
		return 0
	}
	reg.GaugeFunc(prefix+"app_store_up", "1 while the last read of the app store's table succeeded; 0 while the database is unreachable (the node serves the apps it knows).", nil, up)
	reg.GaugeFunc(prefix+"app_store_apps", "Apps the node knows from the app store's table.", nil, func() float64 { return float64(s.Status().Apps) })
	reg.CounterFunc(prefix+"app_store_reloads_total", "Full reads of the app store's table.", nil, func() float64 { return float64(s.Status().Reloads) })
	reg.CounterFunc(prefix+"app_store_errors_total", "Failed reads of the app store's table (the database unreachable or refusing).", nil,
		func() float64 { return float64(s.Status().Errors) })
	reg.GaugeFunc(prefix+"app_store_bad_webhooks", "Apps of the app store's table served without some of their webhooks: herald cannot send them (the log says why).", nil,
		func() float64 { return float64(s.Status().BadWebhooks) })
	reg.GaugeFunc(prefix+"app_store_bad_history", "Apps of the app store's table served without some of their history rules: herald cannot keep them (the log says why).", nil,
		func() float64 { return float64(s.Status().BadHistory) })
	reg.GaugeFunc(prefix+"app_store_last_sync_timestamp_seconds", "When the app store's table was last read successfully (Unix seconds).", nil,
		func() float64 { return float64(s.Status().LastSync.UnixMilli()) / 1000 })
}

// appAdmin is the node's apps as the console's apps API writes them: through the app
// store's table, then read back at once so that this node has the change (the others hear
// of it by notification or at their next poll).
type appAdmin struct{ a *appStore }

var _ console.AppAdmin = appAdmin{}

func (x appAdmin) Apps() []*herald.App {
	apps := slices.Clone(x.a.apps().Apps())
	slices.SortFunc(apps, func(a, b *herald.App) int { return strings.Compare(a.ID, b.ID) })
	return apps
}

func (x appAdmin) App(id string) (*herald.App, bool) { return x.a.apps().AppByID(id) }

func (x appAdmin) writer() appstore.Writer {
	if x.a.store == nil {
		return nil
	}
	w, _ := x.a.store.Source().(appstore.Writer)
	return w
}

func (x appAdmin) Writable() (bool, string) {
	if x.writer() == nil {
		return false, "the apps come from the configuration file and the environment: change them there and restart the nodes, or keep them in a database (app_store)"
	}
	return true, ""
}

func (x appAdmin) Create(ctx context.Context, a herald.App) error {
	if err := x.writer().Insert(ctx, a); err != nil {
		return err
	}
	return x.a.store.ReloadApp(ctx, a.ID)
}

func (x appAdmin) Update(ctx context.Context, a herald.App) error {
	if err := x.writer().Update(ctx, a); err != nil {
		return err
	}
	return x.a.store.ReloadApp(ctx, a.ID)
}

package console

import (
	"context"
	"embed"
	"encoding/json"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
)

//go:embed page
var page embed.FS

// Config sets a Console up. Token is required: without one there is no console.
type Config struct {
	Token string
	// SessionLifetime is how long a browser stays logged in after the login form; default
	// DefaultSessionLifetime.
	SessionLifetime time.Duration
	// Node names this node in the overview; in a cluster, its cluster.node_id.
	Node string
	// EventsPerSecond is how many entries of one app's debug log are kept a second while a
	// page watches it; the rest are sampled out (counted, shown as a number). Default 100.
	EventsPerSecond int
	// Apps are the app ids, in the order the page lists them.
	Apps []string
	// AppList, when set, lists the app ids instead of Apps, at each overview: an app
	// store's, which change while the node runs. The page gets at most maxListed of them.
	AppList func() []string
	// HasApp and Observe, when set, let a page watch an app not in Apps (an app store's): the
	// console attaches its observer with Observe the first time a page watches the app, if
	// HasApp says it exists.
	HasApp  func(id string) bool
	Observe func(appID string, o herald.ActivityObserver) (detach func(), err error)
	// Admin, when set, serves the apps API under /console/api/apps; nil: it lists nothing
	// and refuses writes (405).
	Admin AppAdmin
	// Source reads the node's figures.
	Source Source
	// Publish answers an event creator's request for app: it must do what POST
	// /apps/{id}/events does once the request is authenticated (same body, validation,
	// errors and answer).
	Publish func(w http.ResponseWriter, r *http.Request, appID string)
	// Refresh, when set, is called after an app's observer turned on (its first page) or
	// off (its last page left), outside the console's locks: the server reads Wants again.
	Refresh func(appID string)
	// Bus, when set, carries this node's figures to the other nodes' consoles and theirs to
	// this one, once a second (see BusKind).
	Bus herald.Broker
	// Route, with Bus, registers a handler for the bus's messages of one kind, a nil one
	// removing it (broker.Mux.Handle): the console's handler for BusKind is registered while
	// it has interest on the bus (from New to Close). Without it the console shares its
	// figures but hears no other node's.
	Route func(kind herald.BusKind, h herald.BusHandler)
	// Interval is how often the figures are sampled and streamed; default 1s.
	Interval time.Duration
}

// Source is what the console reads of the node; cmd/herald adapts the server to it.
type Source interface {
	// Sample returns the node's counters now.
	Sample() Sample
	// TopChannels returns the app's n channels with the most subscribers (in a cluster,
	// over every node) and how many channels the app has occupied.
	TopChannels(appID string, n int) (top []ChannelCount, channels int)
}

// Sample is a node's counters at one moment. Counters only grow; the console turns them
// into rates.
type Sample struct {
	Apps    []AppSample
	Refused map[string]int64 // connections refused at the handshake, by reason, ever
}

// AppSample is one app's counters on one node.
type AppSample struct {
	ID             string
	Connections    int64 // now
	Channels       int64 // occupied on this node now
	Subscriptions  int64 // now
	NewConnections int64
	MessagesIn     int64
	MessagesOut    int64
	SlowConsumers  int64
}

// ChannelCount is one channel of the top list.
type ChannelCount struct {
	Name          string `json:"name"`
	Subscriptions int    `json:"subscriptions"`
}

// Console serves the page, its stream and its event creator.
type Console struct {
	cfg     Config
	auth    auth
	wmu     sync.Mutex
	watches map[string]*watch // under wmu
	mux     *http.ServeMux
	log     *slog.Logger
	peers   peers // the other nodes' consoles

	streams atomic.Int32 // streams open now
	latest  atomic.Pointer[nodeStats]

	mu    sync.Mutex
	nodes map[string]*remote // other nodes' figures, by node id
	hist  map[string]*ring   // every node's charts (history.go), by node id, this one's too

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	closed sync.Once
}

// maxStreams bounds the streams open at once: the metrics listener has few connections and
// Prometheus must keep one.
const maxStreams = 8

// New builds the console and starts its sampler. log may be nil.
func New(cfg Config, log *slog.Logger) *Console {
	if cfg.EventsPerSecond <= 0 {
		cfg.EventsPerSecond = 100
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Console{cfg: cfg, auth: newAuth(cfg.Token), watches: map[string]*watch{}, mux: http.NewServeMux(), peers: peersOf(cfg),
		log: log, nodes: map[string]*remote{}, hist: map[string]*ring{}, done: make(chan struct{})}
	for _, id := range cfg.Apps {
		c.watches[id] = newWatch(id, cfg.EventsPerSecond)
	}
	c.mux.HandleFunc("GET /console", c.page)
	if cfg.SessionLifetime > 0 {
		c.auth.sessions.lifetime = cfg.SessionLifetime
	}
	c.mux.HandleFunc("GET /console/login", c.loginForm)
	c.mux.HandleFunc("POST /console/login", c.login)
	c.mux.HandleFunc("POST /console/logout", c.logout)
	c.mux.HandleFunc("GET /console/stream", c.allowed(c.stream))
	c.mux.HandleFunc("POST /console/apps/{id}/events", c.allowed(c.publish))
	c.mux.HandleFunc("GET /console/api/apps", c.allowed(c.listApps))
	c.mux.HandleFunc("POST /console/api/apps", c.allowed(jsonOnly(c.createApp)))
	c.mux.HandleFunc("GET /console/api/apps/{id}", c.allowed(c.getApp))
	c.mux.HandleFunc("PATCH /console/api/apps/{id}", c.allowed(jsonOnly(c.updateApp)))
	c.mux.HandleFunc("POST /console/api/apps/{id}/disable", c.allowed(jsonOnly(c.setEnabled(false))))
	c.mux.HandleFunc("POST /console/api/apps/{id}/enable", c.allowed(jsonOnly(c.setEnabled(true))))
	c.mux.HandleFunc("POST /console/api/apps/{id}/rotate-secret", c.allowed(jsonOnly(c.rotateSecret)))
	c.mux.HandleFunc("/console/", c.allowed(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "no route for " + r.Method + " " + r.URL.Path, "code": http.StatusNotFound})
	}))
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.sample(nil)
	go c.run()
	return c
}

// Observer returns the app's activity observer, for the server; nil for an app not in
// Config.Apps.
func (c *Console) Observer(appID string) herald.ActivityObserver {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if w := c.watches[appID]; w != nil {
		return w
	}
	return nil
}

// watchOf returns the app's watch: one of Config.Apps', or one made now for an app that
// Config.HasApp knows (attached with Config.Observe); nil for an unknown app.
func (c *Console) watchOf(appID string) *watch {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if w := c.watches[appID]; w != nil {
		return w
	}
	if appID == "" || c.cfg.HasApp == nil || c.cfg.Observe == nil || !c.cfg.HasApp(appID) {
		return nil
	}
	w := newWatch(appID, c.cfg.EventsPerSecond)
	if _, err := c.cfg.Observe(appID, w); err != nil {
		c.log.Warn("console: observe", "app_id", appID, "err", err)
		return nil
	}
	c.watches[appID] = w
	return w
}

// maxListed bounds the app ids an overview carries: a node of an app store may have many
// thousands; the page opens any other by its id.
const maxListed = 500

// appIDs lists the apps for the page.
func (c *Console) appIDs() []string {
	if c.cfg.AppList == nil {
		return c.cfg.Apps
	}
	ids := c.cfg.AppList()
	return ids[:min(len(ids), maxListed)]
}

// ServeHTTP serves /console and everything under it; a request that changes something and
// comes from a page of another origin is refused with 403 first (origin.go).
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if why := sameOrigin(r); why != "" {
		writeJSON(w, http.StatusForbidden, map[string]any{"error": why, "code": http.StatusForbidden})
		return
	}
	c.mux.ServeHTTP(w, r)
}

// Close stops the sampler and ends every stream; it is idempotent, and does nothing on a
// nil Console (no console configured).
func (c *Console) Close() {
	if c == nil {
		return
	}
	c.closed.Do(func() {
		c.cancel()
		<-c.done
	})
}

// allowed serves next only to a request with the cookie or the bearer token.
func (c *Console) allowed(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !c.auth.allowed(r) {
			unauthorized(w)
			return
		}
		next(w, r)
	}
}

// page serves the page to a logged-in browser or a bearer. A browser that is not logged in
// is sent to the login form; a token in the URL is never accepted (it would stay in the
// browser's history).
func (c *Console) page(w http.ResponseWriter, r *http.Request) {
	if !c.auth.allowed(r) {
		if wantsHTML(r) {
			to := "/console/login"
			if app := r.URL.Query().Get("app"); app != "" {
				to += "?app=" + url.QueryEscape(app)
			}
			http.Redirect(w, r, to, http.StatusSeeOther)
			return
		}
		unauthorized(w)
		return
	}
	body, err := page.ReadFile("page/index.html")
	if err != nil { // embedded: cannot happen in a built binary
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(body)
}

// publish is the event creator: the REST API's own path, for the app in the URL.
func (c *Console) publish(w http.ResponseWriter, r *http.Request) {
	// A JSON body cannot come from another site's form without a CORS preflight, which
	// this listener never grants; with SameSite=Strict that closes cross-site requests.
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeJSON(w, http.StatusUnsupportedMediaType, map[string]any{"error": "console: send the event as application/json", "code": http.StatusUnsupportedMediaType})
		return
	}
	c.cfg.Publish(w, r, r.PathValue("id"))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

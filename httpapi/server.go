package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/pusher"
)

// PusherServer is what the API needs of the node's Pusher server (session.Server).
type PusherServer interface {
	ServeWS(w http.ResponseWriter, r *http.Request, key string)
	// Publish delivers evs (docs/guarantees.md): nil means each is delivered, or kept in its
	// channel's history, or handed to the bus, as the node is. On a single node a failed call
	// delivered none of them; in a cluster it may have handed the first to the bus. Either
	// way a retry of the whole call with the events' idempotency keys (herald.Event.Key)
	// delivers none twice where the key is kept.
	Publish(appID string, evs ...herald.Event) error
	Channels(appID, prefix string) []herald.ChannelStat
	Channel(appID, name string) (herald.ChannelStat, bool)
	Users(appID, name string) []string
	TerminateUser(appID, userID string) int
	// History reads the events a history channel keeps after offset after, at most limit of
	// them; an error with code CodeNotFound when the channel keeps none.
	History(ctx context.Context, appID, channel string, after uint64, limit int) (herald.HistoryPage, error)
}

// Hub is the former name of PusherServer.
//
// Deprecated: use PusherServer.
type Hub = PusherServer

// Health reports the node's state for /health and /ready.
type Health func() HealthReport

// HealthReport is the detailed /health body, on the metrics listener (DetailedHealth); the
// public port's /health is its PublicHealth part.
type HealthReport struct {
	// Status is, first match wins, "draining" (shutting down), "refusing" (the memory guard
	// refuses new connections), "bus_down" (the cluster bus is unreachable), "full"
	// (Connections.Current has reached Connections.Max; the Server sets it) or "ok"; /ready
	// answers 503 unless it is "ok".
	Status      string   `json:"status"`
	Connections Capacity `json:"connections"`
	Channels    int64    `json:"channels"`
	Version     string   `json:"version"` // herald's version
	// Cluster is the node's cluster bus; nil on a single node.
	Cluster *ClusterHealth `json:"cluster,omitempty"`
	// Ingest lists the node's Kafka and Redis sources; a source that is down does not change
	// Status (the node serves its clients regardless).
	Ingest []IngestHealth `json:"ingest,omitempty"`
	// AppStore is the database that keeps the apps; nil without one. Its being down does not
	// change Status: the node serves the apps it knows.
	AppStore *AppStoreHealth `json:"app_store,omitempty"`
}

// AppStoreHealth is the state of the app store's database.
type AppStoreHealth struct {
	Kind      string    `json:"kind"`      // "postgres" or "mysql"
	Up        bool      `json:"up"`        // the last read of the table succeeded
	Listening bool      `json:"listening"` // PostgreSQL: change notifications are on
	Apps      int       `json:"apps"`
	LastSync  time.Time `json:"last_sync"`
	LastError string    `json:"last_error,omitempty"`
}

// IngestHealth is the state of one ingest source.
type IngestHealth struct {
	Name     string `json:"name"`
	Kind     string `json:"kind"`            // "kafka", "redis_stream" or "redis_pubsub"
	State    string `json:"state"`           // starting, up, paused (the node refuses events), down or stopped
	Error    string `json:"error,omitempty"` // the last connection error while down
	Consumed uint64 `json:"consumed"`
	Lag      int64  `json:"lag"` // records not consumed yet, over all partitions
}

// ClusterHealth is the state of a clustered node's connection to the bus.
type ClusterHealth struct {
	Engine    string `json:"engine"` // "nats" or "redis"
	NodeID    string `json:"node_id"`
	Connected bool   `json:"connected"`
	Interests int    `json:"interests"` // (app, channel) pairs this node is subscribed to on the bus
	// Mode and Shards, on a Redis bus of several connections (shards, a Redis Cluster's
	// channel groups): how it is reached, and each connection's state. Connected is then
	// the state of the one that carries the cluster's internal keys.
	Mode   string        `json:"mode,omitempty"`
	Shards []ShardHealth `json:"shards,omitempty"`
	// Nodes are this node (first) and the live nodes it hears on the bus, with their releases
	// and wire versions; FeaturesInUse the wire features every one of them reads, and so
	// are used (docs/cluster.md, upgrading node by node).
	Nodes         []ClusterNode `json:"nodes,omitempty"`
	FeaturesInUse []string      `json:"features_in_use,omitempty"`
}

// ShardHealth is one connection of a bus of several.
type ShardHealth struct {
	ID        string `json:"id"`
	Connected bool   `json:"connected"`
	Interests int    `json:"interests"`
}

// ClusterNode is one node of ClusterHealth.Nodes.
type ClusterNode struct {
	NodeID       string   `json:"node_id"`
	Self         bool     `json:"self,omitempty"`
	Release      string   `json:"release"`       // "" for a node of v0.1.0, which does not say
	StateVersion int      `json:"state_version"` // its state stream's version: 1 for v0.1.0
	Features     []string `json:"features"`      // the wire features it reads
}

// Capacity is how many connections the node holds and can hold: max is the smaller of the
// configured limit and what the process's open-file limit allows.
type Capacity struct {
	Current int64 `json:"current"`
	Max     int   `json:"max"`
}

// Config tunes the API.
type Config struct {
	TimestampWindow time.Duration // REST auth_timestamp tolerance; default 600s
	MaxBodyBytes    int64         // largest request body; default 1 MiB
	// ReplayProtection refuses (401) a signed request whose signature was already accepted
	// inside the timestamp window. Off, a captured request can be replayed within the
	// window, as on Pusher.
	ReplayProtection bool
	// ReplayMaxPerApp bounds the signatures remembered per app (each app its own bound, so one
	// app cannot fill it for the others); 0 means DefaultReplayMaxPerApp.
	ReplayMaxPerApp int
}

// Meter counts an app's REST calls and their bytes; nil counts nothing.
type Meter interface {
	Call(appID string, received, transmitted int64)
}

// Server routes requests.
type Server struct {
	cfg      Config
	apps     herald.AppStore
	node     PusherServer // the node's Pusher server
	health   Health
	log      *slog.Logger
	meter    Meter
	mux      *http.ServeMux
	now      func() time.Time
	limiters sync.Map      // app id -> *rateLimiter
	replays  *replayCaches // nil unless Config.ReplayProtection
	refusals refusalLog
}

// New builds the API's handler. meter may be nil.
func New(cfg Config, apps herald.AppStore, node PusherServer, health Health, meter Meter, log *slog.Logger) *Server {
	if cfg.TimestampWindow <= 0 {
		cfg.TimestampWindow = 600 * time.Second
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, apps: apps, node: node, health: health, meter: meter, log: log, mux: http.NewServeMux(), now: time.Now}
	if cfg.ReplayProtection {
		s.replays = newReplayCaches(cfg.TimestampWindow, cfg.ReplayMaxPerApp)
	}
	s.mux.HandleFunc("GET /app/{key}", func(w http.ResponseWriter, r *http.Request) { node.ServeWS(w, r, r.PathValue("key")) })
	s.mux.HandleFunc("POST /apps/{id}/events", s.signed(s.events))
	s.mux.HandleFunc("POST /apps/{id}/batch_events", s.signed(s.batchEvents))
	s.mux.HandleFunc("GET /apps/{id}/channels", s.signed(s.channels))
	s.mux.HandleFunc("GET /apps/{id}/channels/{name}", s.signed(s.channel))
	s.mux.HandleFunc("GET /apps/{id}/channels/{name}/users", s.signed(s.users))
	s.mux.HandleFunc("GET /apps/{id}/channels/{name}/history", s.signed(s.history))
	s.mux.HandleFunc("POST /apps/{id}/users/{uid}/terminate_connections", s.signed(s.terminate))
	s.mux.HandleFunc("GET /health", s.healthz)
	s.mux.HandleFunc("GET /ready", s.ready)
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"server": "herald"})
	})
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		refuseEarly(w, r, herald.Errorf(herald.CodeNotFound, "no route for %s %s", r.Method, r.URL.Path))
	})
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// lookup finds the app of a REST call: unknown (404), unknown while the store has lost its
// database (503: it may be an app created meanwhile) or disabled (403) are errors.
func (s *Server) lookup(id string) (*herald.App, error) {
	app, ok := s.apps.AppByID(id)
	switch {
	case !ok:
		if st, can := s.apps.(herald.AppStoreStale); can && st.Stale() {
			return nil, herald.Errorf(herald.CodeUnavailable, "app %q is not known here and the app store is unreachable, retry later", id)
		}
		return nil, herald.Errorf(herald.CodeAppNotFound, "app %q does not exist", id)
	case app.Disabled:
		return nil, herald.Errorf(herald.CodeAppDisabled, "app %q is disabled", id)
	}
	return app, nil
}

// request is a verified REST call.
type request struct {
	app  *herald.App
	body []byte
	r    *http.Request
}

// signed checks a REST call as early as the request allows before calling next: the app
// (from the path) and the query's signature before a byte of the body is read, so that an
// unsigned request never holds the connection for its body; then the body (bounded, within
// the request deadline of the Port) and its body_md5; then replay protection, if on; then
// it takes one request from the app's rate. Every call for a known app is metered, refused
// or not, and its refusals are logged (refusalLog).
func (s *Server) signed(next func(w http.ResponseWriter, q *request)) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		app, err := s.lookup(r.PathValue("id"))
		if err != nil {
			refuseEarly(rw, r, err)
			return
		}
		cw := &countingWriter{ResponseWriter: rw}
		w := http.ResponseWriter(cw)
		defer func() {
			s.metered(app.ID, r, cw)
			if cw.err != nil {
				s.refusals.log(s.log, s.now(), app.ID, r, cw.err)
			}
		}()
		query := r.URL.Query()
		// A body of unknown length (chunked) may turn out empty: CheckBodyMD5 decides then.
		if err := pusher.VerifyQuery(app, r.Method, r.URL.Path, query, r.ContentLength > 0, s.now(), s.cfg.TimestampWindow); err != nil {
			refuseEarly(w, r, err)
			return
		}
		if r.ContentLength > s.cfg.MaxBodyBytes {
			refuseEarly(w, r, herald.Errorf(herald.CodeTooLarge, "request body over %d bytes", s.cfg.MaxBodyBytes))
			return
		}
		body, err := s.readBody(w, r)
		if err != nil {
			writeError(w, err)
			return
		}
		if err := pusher.CheckBodyMD5(query, body); err != nil {
			writeError(w, err)
			return
		}
		var seen replayKey
		var replays *replayCache
		if s.replays != nil {
			replays, seen = s.replays.of(app.ID), keyOf(app.ID, query.Get("auth_signature"))
			if err := replays.check(seen, s.now()); err != nil {
				writeError(w, err)
				return
			}
		}
		// After the signature: unsigned and replayed requests must not spend the app's rate.
		if err := s.takeRate(w, app); err != nil {
			if replays != nil {
				replays.forget(seen)
			}
			writeError(w, err)
			return
		}
		next(w, &request{app: app, body: body, r: r})
	}
}

// metered counts a call of the app appID: r's body and the answer cw wrote.
func (s *Server) metered(appID string, r *http.Request, cw *countingWriter) {
	if s.meter != nil {
		s.meter.Call(appID, max(r.ContentLength, 0), cw.n)
	}
}

// readBody reads r's body, at most MaxBodyBytes of it.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, herald.Errorf(herald.CodeTooLarge, "request body over %d bytes", s.cfg.MaxBodyBytes)
		}
		return nil, herald.Errorf(herald.CodeInvalid, "read body: %v", err)
	}
	return body, nil
}

// takeRate takes one request from app's rate of API requests. An app over it gets the error
// to answer, with Retry-After set on w.
func (s *Server) takeRate(w http.ResponseWriter, app *herald.App) error {
	wait, ok := s.limiter(app).take(s.now())
	if ok {
		return nil
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
	return herald.Errorf(herald.CodeRateLimited, "app %s is over its rate of %d API requests per second",
		app.ID, app.Limits.MaxAPIRequestsPerSecond)
}

// bodyGrace is how long a request refused before its body was read may take to deliver the
// rest of it, which net/http reads and discards before closing. A client that sent its body
// behind its headers has it discarded, so its answer is not lost to a reset; a slow-loris is
// cut off.
const bodyGrace = 500 * time.Millisecond

// refuseEarly answers a request refused before its body was read, and closes the connection
// after the answer: the unread body is the client's to keep, not the server's to wait for.
func refuseEarly(w http.ResponseWriter, r *http.Request, err error) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyGrace))
	}
	writeError(w, err)
}

// PublicHealth is the public /health body: what a load balancer, an autoscaler or a load
// generator (herald-bench) reads, the status (which /ready turns into 200 or 503) and the
// node's connections against its capacity and its channels, and nothing of its internals.
// The whole HealthReport, with the bus, its nodes and their releases, the app store and its
// last error, the ingest sources and herald's version, is DetailedHealth's, on the private
// metrics listener.
type PublicHealth struct {
	Status      string   `json:"status"`
	Connections Capacity `json:"connections"`
	Channels    int64    `json:"channels"`
}

// healthz answers the public /health: the status and the counts only.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	h := s.report()
	writeJSON(w, http.StatusOK, PublicHealth{Status: h.Status, Connections: h.Connections, Channels: h.Channels})
}

// DetailedHealth answers with the whole health report (the bus, its nodes, the app store,
// the ingest sources, their last errors, the version): for the private metrics listener, not
// the public port.
func (s *Server) DetailedHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.report())
}

// report is the health report, with Status "full" when the node holds as many connections
// as it can and is otherwise ok.
func (s *Server) report() HealthReport {
	h := s.health()
	if h.Status == "ok" && h.Connections.Max > 0 && h.Connections.Current >= int64(h.Connections.Max) {
		h.Status = "full"
	}
	return h
}

func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	h := s.report()
	if h.Status != "ok" {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "status": h.Status})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ready": true})
}

// countingWriter counts the body bytes of a response and keeps the error it answered with.
type countingWriter struct {
	http.ResponseWriter
	n   int64
	err error // set by writeError
}

// answered records the error a response carries.
func (c *countingWriter) answered(err error) { c.err = err }

// Unwrap lets http.ResponseController reach the connection.
func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	c.n += int64(n)
	return n, err
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers with the error's HTTP status and a JSON body; a refusal the client may
// retry soon (rate limited, a full queue, the cluster bus unreachable) carries Retry-After.
func writeError(w http.ResponseWriter, err error) {
	if c, ok := w.(*countingWriter); ok {
		c.answered(err)
	}
	code := herald.CodeOf(err)
	status := code.HTTPStatus()
	retry := code == herald.CodeRateLimited || code == herald.CodeBusy || code == herald.CodeUnavailable
	if retry && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, map[string]any{"error": herald.MessageOf(err), "code": status})
}

package config

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/herald-rt/herald"
)

// IngestConfig is one source herald consumes into an app's channels (the file's ingest
// list; there is no environment variable or flag for it). Exactly one of Kafka and Redis is set.
type IngestConfig struct {
	Name  string // unique; in logs, metrics and /health
	App   string // the id of the app whose channels receive the events
	Kafka *IngestKafka
	Redis *IngestRedis
	// Channel, Event and Data are templates (see ingest.Template); Data empty means the
	// record's value as it is. With Format "pusher" they must be empty.
	Channel, Event, Data string
	// Format is "template" (the default) or "pusher": each record a REST events body.
	Format string
	// DeadLetter is the Kafka topic or Redis stream bad records go to; empty: none.
	DeadLetter string
	// AllowChannels are globs of the channels the source may publish to; empty: public
	// channels only (see ingest.Config.AllowChannels).
	AllowChannels []string
}

// IngestKafka is a Kafka source: a consumer group over topics.
type IngestKafka struct {
	Brokers []string // host:port
	Topics  []string
	Group   string
	Start   string // earliest or latest (default), for partitions the group has no offset of
	// SessionTimeout is how long the group waits for a node that went silent before its
	// partitions go to the others.
	SessionTimeout Duration
	// TLS connects to the brokers over TLS: TLSCAFile verifies them (empty: the system's
	// roots), TLSCertFile and TLSKeyFile are this node's client certificate. Any file implies
	// TLS.
	TLS                                bool
	TLSCAFile, TLSCertFile, TLSKeyFile string
	// SASLMechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) authenticates as SASLUser with
	// SASLPassword, or the content of SASLPasswordFile (read by validation).
	SASLMechanism, SASLUser, SASLPassword, SASLPasswordFile string
}

// IngestRedis is a Redis source: a stream read by a consumer group, or pub/sub patterns.
type IngestRedis struct {
	URL       string
	Stream    string
	Group     string
	Subscribe []string // pub/sub patterns (PSUBSCRIBE): at most once
	Start     string   // earliest or latest (default), where a group herald creates begins
	// ClaimIdle is how long a stream entry stays pending with a consumer (a node that died)
	// before another node claims it (XAUTOCLAIM).
	ClaimIdle Duration
}

// decodeIngest reads the file's ingest list.
func (l *loader) decodeIngest(v fileValue, src string) {
	items, err := v.items()
	if err != nil {
		l.fail("ingest", src, err)
		return
	}
	l.read("ingest", src)
	l.cfg.Ingest = make([]IngestConfig, len(items))
	for i, item := range items {
		c := &l.cfg.Ingest[i]
		at := fmt.Sprintf("ingest[%d]", i)
		fields := l.scalars(at, src, map[string]any{
			"name": &c.Name, "app": &c.App, "channel": &c.Channel, "event": &c.Event, "data": &c.Data,
			"format": &c.Format, "dead_letter": &c.DeadLetter, "allow_channels": &c.AllowChannels,
		})
		fields["kafka"] = func(v fileValue) {
			k := &IngestKafka{}
			c.Kafka = k
			l.scalarTable(v, at+".kafka", src, map[string]any{
				"brokers": &k.Brokers, "topics": &k.Topics, "group": &k.Group, "start": &k.Start,
				"session_timeout": &k.SessionTimeout, "tls": &k.TLS, "tls_ca_file": &k.TLSCAFile,
				"tls_cert_file": &k.TLSCertFile, "tls_key_file": &k.TLSKeyFile, "sasl_mechanism": &k.SASLMechanism,
				"sasl_user": &k.SASLUser, "sasl_password": &k.SASLPassword, "sasl_password_file": &k.SASLPasswordFile,
			})
		}
		fields["redis"] = func(v fileValue) {
			r := &IngestRedis{}
			c.Redis = r
			l.scalarTable(v, at+".redis", src, map[string]any{
				"url": &r.URL, "stream": &r.Stream, "group": &r.Group, "subscribe": &r.Subscribe,
				"claim_idle": &r.ClaimIdle, "start": &r.Start,
			})
		}
		l.table(item, at, src, fields)
	}
}

// ingest checks the ingest list: each source names a known app, one engine and templates
// that compile (a bad one is reported under its field, "ingest[0].channel").
func (l *loader) ingest() {
	c := &l.cfg
	apps := map[string]bool{}
	for _, a := range c.Apps {
		apps[a.ID] = true
	}
	names := map[string]int{}
	for i := range c.Ingest {
		s := &c.Ingest[i]
		at := fmt.Sprintf("ingest[%d]", i)
		switch first, dup := names[s.Name]; {
		case s.Name == "":
			l.problem(at+".name", "must not be empty")
		case strings.Trim(s.Name, NodeIDChars) != "":
			l.problem(at+".name", "%q may hold only letters, digits, '_', '.' and '-'", s.Name)
		case dup:
			l.problem(at+".name", "duplicate of ingest[%d].name", first)
		default:
			names[s.Name] = i
		}
		if !apps[s.App] && !c.AppStore.On() { // a database's apps are checked at start
			l.problem(at+".app", "%q is not the id of a configured app", s.App)
		}
		switch {
		case s.Kafka == nil && s.Redis == nil:
			l.problem(at, "needs a kafka or a redis table")
		case s.Kafka != nil && s.Redis != nil:
			l.problem(at+".redis", "a source has kafka or redis, not both")
		case s.Kafka != nil:
			l.ingestKafka(at+".kafka", s.Kafka)
		default:
			l.ingestRedis(at+".redis", s.Redis)
		}
		l.ingestTemplates(at, s)
		l.ingestAllow(at, s)
		if s.DeadLetter != "" && ((s.Kafka != nil && slices.Contains(s.Kafka.Topics, s.DeadLetter)) ||
			(s.Redis != nil && s.Redis.Stream == s.DeadLetter)) {
			l.problem(at+".dead_letter", "%q is a topic or stream the source reads: its bad records would come back forever", s.DeadLetter)
		}
	}
}

func (l *loader) ingestKafka(at string, k *IngestKafka) {
	if len(k.Brokers) == 0 {
		l.problem(at+".brokers", "at least one broker (host:port) is required")
	}
	for j, b := range k.Brokers {
		if _, port, err := net.SplitHostPort(b); err != nil || port == "" {
			l.problem(fmt.Sprintf("%s.brokers[%d]", at, j), "%q is not host:port", b)
		}
	}
	if len(k.Topics) == 0 {
		l.problem(at+".topics", "at least one topic is required")
	}
	for j, t := range k.Topics {
		if t == "" {
			l.problem(fmt.Sprintf("%s.topics[%d]", at, j), "must not be empty")
		}
	}
	if k.Group == "" {
		l.problem(at+".group", "must not be empty: every node of a cluster joins this consumer group")
	}
	if k.Start != "" {
		l.oneOf(at+".start", k.Start, "earliest", "latest")
	}
	if k.SessionTimeout.Duration != 0 {
		l.longerThan(at+".session_timeout", k.SessionTimeout, ingestMinSession)
	}
	if k.TLSCAFile != "" || k.TLSCertFile != "" || k.TLSKeyFile != "" {
		k.TLS = true
		if err := l.check.TLSFiles(k.TLSCAFile, k.TLSCertFile, k.TLSKeyFile); err != nil {
			l.problem(at+".tls_cert_file", "%v", err)
		}
	}
	l.secretFile(at+".sasl_password", &k.SASLPassword, k.SASLPasswordFile)
	switch k.SASLMechanism {
	case "":
		if k.SASLUser != "" || k.SASLPassword != "" {
			l.problem(at+".sasl_mechanism", "sasl_user and sasl_password need a mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
		}
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		if k.SASLUser == "" || k.SASLPassword == "" {
			l.problem(at+".sasl_user", "SASL %s needs sasl_user and sasl_password (or sasl_password_file)", k.SASLMechanism)
		}
	default:
		l.problem(at+".sasl_mechanism", "%q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", k.SASLMechanism)
	}
}

func (l *loader) ingestRedis(at string, r *IngestRedis) {
	if r.URL == "" {
		l.problem(at+".url", "must not be empty")
	} else if _, _, err := l.check.BusURL(r.URL); err != nil || !strings.HasPrefix(strings.ToLower(r.URL), "redis") {
		l.problem(at+".url", "want redis://[user:password@]host:port[/db] or rediss://")
	} else if _, err := rueidis.ParseURL(r.URL); err != nil {
		l.problem(at+".url", "%v", err)
	}
	switch {
	case r.Stream == "" && len(r.Subscribe) == 0:
		l.problem(at, "needs a stream (with a group) or subscribe patterns")
	case r.Stream != "" && len(r.Subscribe) > 0:
		l.problem(at+".subscribe", "a source reads a stream or subscribes, not both")
	case r.Stream != "" && r.Group == "":
		l.problem(at+".group", "must not be empty: every node of a cluster reads the stream in this consumer group")
	case len(r.Subscribe) > 0 && r.Group != "":
		l.problem(at+".group", "pub/sub has no consumer group")
	}
	for j, p := range r.Subscribe {
		if p == "" {
			l.problem(fmt.Sprintf("%s.subscribe[%d]", at, j), "must not be empty")
		}
	}
	if r.Start != "" {
		l.oneOf(at+".start", r.Start, "earliest", "latest")
	}
	if r.ClaimIdle.Duration != 0 {
		l.longerThan(at+".claim_idle", r.ClaimIdle, ingestMinClaimIdle)
	}
}

// ingestTemplates compiles a source's templates, reporting each under its field.
func (l *loader) ingestTemplates(at string, s *IngestConfig) {
	switch s.Format {
	case "pusher":
		for key, v := range map[string]string{"channel": s.Channel, "event": s.Event, "data": s.Data} {
			if v != "" {
				l.problem(at+"."+key, "not used with format pusher: each record names its own channel, event and data")
			}
		}
		return
	case "", "template":
	default:
		l.problem(at+".format", "%q is not one of template, pusher", s.Format)
		return
	}
	var lim herald.Limits
	for _, a := range l.cfg.Apps {
		if a.ID == s.App {
			lim = a.Limits.WithDefaults()
		}
	}
	check := func(key, v string, literal func(string) error) {
		if v == "" && key != "data" {
			l.problem(at+"."+key, "must not be empty (a template such as \"{value.symbol}.trade\", or a name)")
			return
		}
		lit, ok, err := l.check.Template(v)
		if err != nil {
			l.problem(at+"."+key, "%v", err)
			return
		}
		if ok && literal != nil && v != "" {
			if err := literal(lit); err != nil {
				l.problem(at+"."+key, "%s", herald.MessageOf(err))
			}
		}
	}
	check("channel", s.Channel, func(v string) error { return l.check.ChannelName(v, lim.MaxChannelNameLength) })
	check("event", s.Event, func(v string) error { return l.check.EventName(v, lim.MaxEventNameLength) })
	check("data", s.Data, nil)
}

// ingestAllow checks a source's allow_channels, and that a literal channel is allowed.
func (l *loader) ingestAllow(at string, s *IngestConfig) {
	for j, g := range s.AllowChannels {
		switch {
		case g == "":
			l.problem(fmt.Sprintf("%s.allow_channels[%d]", at, j), "must not be empty")
		case !herald.ValidChannelGlob(g):
			l.problem(fmt.Sprintf("%s.allow_channels[%d]", at, j), "%q holds a character no channel name has", g)
		}
	}
	if s.Format == "pusher" || s.Channel == "" {
		return
	}
	if lit, ok, err := l.check.Template(s.Channel); err == nil {
		if ok && !l.check.AllowsChannel(s.AllowChannels, lit) {
			if len(s.AllowChannels) == 0 {
				l.problem(at+".channel", "%q is not a public channel: name it in allow_channels to let this source publish to it", lit)
			} else {
				l.problem(at+".channel", "%q matches none of allow_channels", lit)
			}
		}
	}
}

// Lower bounds of the ingest durations: Kafka refuses sessions shorter than its
// group.min.session.timeout.ms (6 s by default); a claim sooner than 100 ms after delivery
// would take entries from consumers that are merely busy.
const (
	ingestMinSession   = 6 * time.Second
	ingestMinClaimIdle = 100 * time.Millisecond
)

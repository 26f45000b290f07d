package bench

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/rueidis"
	"github.com/twmb/franz-go/pkg/kgo"
)

// logSink is where publishes go with --publish: a Kafka topic or a Redis stream or pub/sub
// channel that herald consumes with an ingest source in the pusher format. Each record is
// one REST events body for one channel, its data stamped with the time it was produced, so
// the latency measured is produce → client.
type logSink interface {
	send(ctx context.Context, bodies [][]byte) error
	close()
}

// parsePublish checks a --publish URL: kafka://host:port[,host:port]/topic, or
// redis://[user:password@]host:port[/db]?stream=name (XADD, field value) or ?channel=name
// (PUBLISH).
func parsePublish(raw string) (scheme string, u *url.URL, err error) {
	u, err = url.Parse(raw)
	if err != nil {
		return "", nil, fmt.Errorf("--publish: not a URL")
	}
	switch u.Scheme {
	case "kafka":
		if u.Host == "" || strings.Trim(u.Path, "/") == "" {
			return "", nil, errors.New("--publish: want kafka://host:port/topic")
		}
	case "redis", "rediss":
		q := u.Query()
		if u.Host == "" || (q.Get("stream") == "") == (q.Get("channel") == "") {
			return "", nil, errors.New("--publish: want redis://host:port[/db]?stream=name or ?channel=name")
		}
	default:
		return "", nil, fmt.Errorf("--publish: scheme %q: want kafka:// or redis://", u.Scheme)
	}
	return u.Scheme, u, nil
}

func newLogSink(raw string) (logSink, error) {
	scheme, u, err := parsePublish(raw)
	if err != nil {
		return nil, err
	}
	if scheme == "kafka" {
		cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(u.Host, ",")...), kgo.ProducerLinger(0), kgo.AllowAutoTopicCreation())
		if err != nil {
			return nil, fmt.Errorf("--publish: %w", err)
		}
		return &kafkaSink{cl: cl, topic: strings.Trim(u.Path, "/")}, nil
	}
	q := u.Query()
	stream, channel := q.Get("stream"), q.Get("channel")
	u.RawQuery = ""
	opt, err := rueidis.ParseURL(u.String())
	if err != nil {
		return nil, fmt.Errorf("--publish: %w", err)
	}
	opt.DisableCache = true
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("--publish: %w", err)
	}
	return &redisSink{c: c, stream: stream, channel: channel}, nil
}

type kafkaSink struct {
	cl    *kgo.Client
	topic string
}

func (k *kafkaSink) send(ctx context.Context, bodies [][]byte) error {
	rs := make([]*kgo.Record, len(bodies))
	for i, b := range bodies {
		rs[i] = &kgo.Record{Topic: k.topic, Value: b}
	}
	return k.cl.ProduceSync(ctx, rs...).FirstErr()
}

func (k *kafkaSink) close() { k.cl.Close() }

type redisSink struct {
	c               rueidis.Client
	stream, channel string
}

func (r *redisSink) send(ctx context.Context, bodies [][]byte) error {
	cmds := make(rueidis.Commands, len(bodies))
	for i, b := range bodies {
		if r.stream != "" {
			cmds[i] = r.c.B().Xadd().Key(r.stream).Id("*").FieldValue().FieldValue("value", string(b)).Build()
		} else {
			cmds[i] = r.c.B().Publish().Channel(r.channel).Message(string(b)).Build()
		}
	}
	for _, res := range r.c.DoMulti(ctx, cmds...) {
		if err := res.Error(); err != nil {
			return err
		}
	}
	return nil
}

func (r *redisSink) close() { r.c.Close() }

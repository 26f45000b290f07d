package ingest

import (
	"strconv"
	"time"
)

// Record is one record of a source, as the templates see it.
type Record struct {
	Topic     string // Kafka topic, Redis stream or pub/sub channel
	Partition int32  // Kafka partition; 0 for Redis
	// Position is the record's place in its log, for logs and dead letters: the Kafka
	// offset or the Redis stream entry id; empty for pub/sub.
	Position string
	Key      []byte
	Headers  []Header
	Value    []byte
	Time     time.Time // when the record was produced; zero when the source does not say
}

// Header is one record header (Kafka) or stream entry field (Redis).
type Header struct {
	Key   string
	Value []byte
}

// header returns the value of the first header named name.
func (r *Record) header(name string) ([]byte, bool) {
	for _, h := range r.Headers {
		if h.Key == name {
			return h.Value, true
		}
	}
	return nil, false
}

// Offset formats a Kafka offset as a Record's Position.
func Offset(o int64) string { return strconv.FormatInt(o, 10) }

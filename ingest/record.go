package ingest

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/herald-rt/herald"
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

// key is the idempotency key of the events of r (herald.Event.Key): its place in its log,
// so that a record read again (a consumer group's rebalance, a node that stopped before
// committing) delivers nothing twice within the key window. "" for a record with no place
// (pub/sub). A place too long for a key is hashed.
func (r *Record) key() string {
	if r.Position == "" {
		return ""
	}
	k := "ingest:" + r.Topic + "/" + strconv.FormatInt(int64(r.Partition), 10) + "/" + r.Position
	if len(k) <= herald.MaxKeyBytes && herald.ValidKey("", k) == nil {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	return "ingest:" + hex.EncodeToString(sum[:])
}

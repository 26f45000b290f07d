package ingest

import "context"

// Source is one running ingest source. Start begins consuming in the source's own
// goroutines; Close stops them, leaving the consumer group where it has one, and waits
// within ctx. Close is idempotent.
type Source interface {
	Start()
	Close(ctx context.Context) error
	Stats() Stats
}

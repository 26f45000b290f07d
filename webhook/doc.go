// Package webhook sends Pusher webhooks: it hears an app's activity through the server's
// observers (herald.ActivityObserver) and posts channel_occupied, channel_vacated,
// member_added, member_removed, client_event, cache_miss and subscription_count events to
// each of the app's configured URLs, signed as Pusher signs them (X-Pusher-Key,
// X-Pusher-Signature), so the Pusher server SDKs verify them.
//
// Each webhook (one URL of one app) has its own bounded queue and one goroutine that sends
// its batches one at a time, in order, retrying a batch with exponential backoff and jitter
// on connection errors, timeouts, 429 and 5xx until it is delivered or its retry time runs
// out: events of one channel reach the backend in the order herald decided them. Observing
// only queues (never blocks), so a slow or dead endpoint never slows the server; when a queue is
// full its oldest event is dropped, counted and logged at most every 10 s.
//
// channel_vacated and member_removed wait Options.LeaveDelay first: a channel occupied (or
// the member added) again within it cancels both, so a page reload sends nothing.
//
// A Sender is safe for concurrent use. The Sender starts the goroutines; Close stops them.
package webhook

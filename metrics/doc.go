// Package metrics exports herald's telemetry to Prometheus and serves pprof.
//
// The metric names follow Soketi and Sockudo (connected, new_connections_total,
// ws_messages_sent_total, socket_transmitted_bytes, http_calls_received_total, ...) with an
// app_id label and a configurable prefix, so their Grafana dashboards work against herald;
// herald's own metrics (publish latency, fan-out queue depth, refusals by reason, channels
// and subscriptions per app, and on a clustered node the cluster bus's bus_*) sit beside
// them. Counters live in the server, the API and the broker, sharded where they are written;
// this package only reads them when Prometheus scrapes, so no metric update takes a lock. It
// reads them through small interfaces of its own (Source, BusSource, WebhookSource) and
// imports none of the server: cmd/herald adapts the server to Source.
package metrics

// Package console is the operators' and app developers' live page, served on the metrics
// listener behind a token: an overview of the node (and, in a cluster, of every node that
// runs a console) streamed once a second, a debug log of one app's activity (connections,
// subscriptions, API and client events, webhooks) streamed as it happens, and an event
// creator that publishes through the REST API's own path.
//
// The console hears an app's activity as a herald.ActivityObserver (Observer). While no page
// watches an app its observer's Wants is 0, so the server builds nothing for it; while one does,
// what the app does is sampled into a bounded ring at a bounded rate, which the pages read.
//
// Console is safe for concurrent use. New starts its sampler; Close stops it and ends every
// stream.
package console

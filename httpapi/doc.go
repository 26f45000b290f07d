// Package httpapi serves the Pusher REST API (/apps/{id}/...), the WebSocket endpoint
// (/app/{key}, handed to the server), and the health and readiness endpoints, all on one port.
//
// Every /apps/ request is signed by the app's secret (Pusher auth_version 1.0, with body_md5
// and a timestamp window); every error is a JSON body {"error": message, "code": status}.
// Port bounds the HTTP phase of a listening port's connections: whole-request deadlines, an
// idle timeout, and a cap that evicts the longest-idle or slowest connection for a new one.
// The Server, Port and their methods are safe for concurrent use.
package httpapi

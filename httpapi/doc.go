// Package httpapi serves the Pusher REST API (/apps/{id}/...), the WebSocket endpoint
// (/app/{key}, handed to the hub), and the health and readiness endpoints, all on one port.
//
// Every /apps/ request is signed by the app's secret (Pusher auth_version 1.0, with body_md5
// and a timestamp window); every error is a JSON body {"error": message, "code": status}.
// The Server is safe for concurrent use.
package httpapi

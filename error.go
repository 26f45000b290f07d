package herald

import (
	"errors"
	"fmt"
	"net/http"
)

// Code is herald's one error vocabulary. Each code maps to one Pusher error/close code (for
// the socket) and one HTTP status (for the REST API); see PusherCode and HTTPStatus.
type Code uint8

// Error codes. Keep the two tables below in step with this list.
const (
	CodeInternal          Code = iota // a bug or an unexpected failure
	CodeInvalid                       // malformed input
	CodeUnauthorized                  // bad or missing signature
	CodeAppNotFound                   // unknown app key or id
	CodeAppDisabled                   // app switched off
	CodeForbidden                     // feature disabled for the app
	CodeNotFound                      // unknown route or resource
	CodeTooLarge                      // payload or name over a limit
	CodeAppOverQuota                  // app's connection quota reached
	CodeOverCapacity                  // node full, presence full
	CodeSlowConsumer                  // outbound queue over its bound
	CodeRateLimited                   // client events or REST over rate
	CodeClientEventDenied             // client event not allowed here
	CodePongTimeout                   // no pong after a server ping
	CodeReconnect                     // server going away: reconnect now
	CodeBusy                          // a shared queue is full: push back
	CodeConnectionRate                // too many new connections from one address
	CodeUnavailable                   // a service herald depends on (the cluster bus) is unreachable
)

var pusherCodes = [...]int{
	CodeInternal:          4000,
	CodeInvalid:           4009,
	CodeUnauthorized:      4009,
	CodeAppNotFound:       4001,
	CodeAppDisabled:       4003,
	CodeForbidden:         4009,
	CodeNotFound:          4005,
	CodeTooLarge:          4301,
	CodeAppOverQuota:      4004,
	CodeOverCapacity:      4100,
	CodeSlowConsumer:      4100,
	CodeRateLimited:       4301,
	CodeClientEventDenied: 4301,
	CodePongTimeout:       4201,
	CodeReconnect:         4200,
	CodeBusy:              4100,
	CodeConnectionRate:    4100,
	CodeUnavailable:       4100,
}

var httpStatuses = [...]int{
	CodeInternal:          http.StatusInternalServerError,
	CodeInvalid:           http.StatusBadRequest,
	CodeUnauthorized:      http.StatusUnauthorized,
	CodeAppNotFound:       http.StatusNotFound,
	CodeAppDisabled:       http.StatusForbidden,
	CodeForbidden:         http.StatusForbidden,
	CodeNotFound:          http.StatusNotFound,
	CodeTooLarge:          http.StatusRequestEntityTooLarge,
	CodeAppOverQuota:      http.StatusForbidden,
	CodeOverCapacity:      http.StatusServiceUnavailable,
	CodeSlowConsumer:      http.StatusServiceUnavailable,
	CodeRateLimited:       http.StatusTooManyRequests,
	CodeClientEventDenied: http.StatusForbidden,
	CodePongTimeout:       http.StatusRequestTimeout,
	CodeReconnect:         http.StatusServiceUnavailable,
	CodeBusy:              http.StatusServiceUnavailable,
	CodeConnectionRate:    http.StatusTooManyRequests,
	CodeUnavailable:       http.StatusServiceUnavailable,
}

// PusherCode is the Pusher protocol error/close code for c (docs/protocol.md, "Error and
// close codes").
func (c Code) PusherCode() int {
	if int(c) < len(pusherCodes) {
		return pusherCodes[c]
	}
	return 4000
}

// HTTPStatus is the REST API status for c.
func (c Code) HTTPStatus() int {
	if int(c) < len(httpStatuses) {
		return httpStatuses[c]
	}
	return http.StatusInternalServerError
}

// Error is a domain error: a code and a message meant for the client.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string { return e.Message }

// Errorf builds an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of the first *Error in err's chain, or CodeInternal.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// MessageOf returns the client-facing message of err: the *Error's message, or a generic one
// for errors that are not domain errors (their detail belongs in logs, not on the wire).
func MessageOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

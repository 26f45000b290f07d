package pusher

// Names of the events clients send that the server acts on.
const (
	EventPing        = "pusher:ping"
	EventPong        = "pusher:pong"
	EventSubscribe   = "pusher:subscribe"
	EventUnsubscribe = "pusher:unsubscribe"
	EventSignin      = "pusher:signin"

	// ClientEventPrefix starts the name of every event a client may send to other clients.
	ClientEventPrefix = "client-"
)

// DefaultActivityTimeout is the activity_timeout, in seconds, that AppendConnectionEstablished
// advertises when given zero or less: pusher-js refuses a handshake without one.
const DefaultActivityTimeout = 120

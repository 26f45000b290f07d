package ingest

// Reason is why a record was skipped as bad.
type Reason uint8

// The reasons a record is bad. Each is counted, and a dead letter carries its name.
const (
	ReasonInvalidJSON       Reason = iota // the value is not the JSON a template or the pusher format needs
	ReasonMissingField                    // a template variable the record does not have
	ReasonInvalidChannel                  // the channel rendered is no valid channel name, or too long
	ReasonInvalidEvent                    // the event name rendered is empty, invalid or too long
	ReasonTooLarge                        // the data is over the app's max_event_payload_bytes
	ReasonInvalidBody                     // pusher format: a body that no REST publish would accept
	ReasonChannelNotAllowed               // a channel the source's allow_channels does not allow
	numReasons
)

var reasonNames = [numReasons]string{
	ReasonInvalidJSON:    "invalid_json",
	ReasonMissingField:   "missing_field",
	ReasonInvalidChannel: "invalid_channel",
	ReasonInvalidEvent:   "invalid_event",
	ReasonTooLarge:       "too_large",
	ReasonInvalidBody:    "invalid_body",

	ReasonChannelNotAllowed: "channel_not_allowed",
}

// String is the reason's name in metrics, logs and dead letters.
func (r Reason) String() string {
	if r >= numReasons {
		return "unknown"
	}
	return reasonNames[r]
}

// Reasons lists every reason, for metrics.
func Reasons() []Reason {
	out := make([]Reason, numReasons)
	for i := range out {
		out[i] = Reason(i)
	}
	return out
}

// badRecord is a record that cannot become events.
type badRecord struct {
	reason Reason
	detail string
}

func (b *badRecord) Error() string { return b.reason.String() + ": " + b.detail }

func bad(r Reason, detail string) *badRecord { return &badRecord{reason: r, detail: detail} }

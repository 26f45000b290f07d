package bench

import (
	"errors"
	"fmt"
)

// ErrNothingMeasured is wrapped by the error of a run that measured nothing: no request made,
// no connection subscribed, no cycle completed, or no expected delivery received. Such a run
// fails whatever its other counts say, so that a mistake (a duration too short to publish, a
// server that accepts events and delivers none) is never reported as a clean result.
var ErrNothingMeasured = errors.New("the run measured nothing")

// nothingMeasured returns an error wrapping ErrNothingMeasured, followed by what was missing.
func nothingMeasured(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrNothingMeasured}, args...)...)
}

// checkDelivered fails a run whose subscribers expected no event, or received none of those
// they expected.
func checkDelivered(d Delivery) error {
	switch {
	case d.Expected == 0:
		return nothingMeasured("no event was published to a subscribed client, so no delivery was measured")
	case d.Delivered == 0:
		return nothingMeasured("none of the %d expected deliveries arrived (waited %.1f s after the last publish; %d event frames received)",
			d.Expected, d.WaitSeconds, d.Received)
	}
	return nil
}

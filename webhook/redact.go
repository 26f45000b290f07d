package webhook

import (
	"errors"
	"net/url"
)

// Redacted is a webhook URL as it may be logged: without its password (URL.Redacted) and
// without its query and fragment, where tokens travel. A URL that does not parse is not
// echoed at all.
func Redacted(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an invalid URL)"
	}
	u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = "", false, "", ""
	return u.Redacted()
}

// redactErr returns err with the URL of a *url.Error (what http.Client returns, holding the
// request's URL with its query) replaced by the redacted one.
func redactErr(err error, raw string) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return &url.Error{Op: ue.Op, URL: Redacted(raw), Err: ue.Err}
	}
	return err
}

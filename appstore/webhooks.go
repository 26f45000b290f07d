package appstore

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/webhook"
)

// The webhooks column is Soketi's: a JSON array of
//
//	{"url": "...", "event_types": ["channel_occupied", ...], "headers": {"Name": "value"},
//	 "filter": {"channel_name_starts_with": "...", "channel_name_ends_with": "..."}}
//
// NULL, "" and [] are no webhook. A webhook herald cannot send (no url or a bad one, a
// Lambda function, no event type it knows, a header it refuses) is left out and the app is
// served without it: Mapping.App returns the app with a *WebhookError saying what was left
// out, and the Store logs it and counts the app (Status.BadWebhooks).

// soketiWebhook is one element of the webhooks column, as Soketi writes it.
type soketiWebhook struct {
	URL            string          `json:"url"`
	LambdaFunction string          `json:"lambda_function"`
	EventTypes     []string        `json:"event_types"`
	Headers        map[string]any  `json:"headers"`
	Filter         *soketiFilter   `json:"filter"`
	Lambda         json.RawMessage `json:"lambda"`
}

type soketiFilter struct {
	ChannelNameStartsWith string `json:"channel_name_starts_with,omitempty"`
	ChannelNameEndsWith   string `json:"channel_name_ends_with,omitempty"`
}

// WebhookError is what a row's webhooks column held that herald cannot send: the app is
// served without it.
type WebhookError struct {
	App      string
	Problems []string // one for each webhook left out (or event type ignored), or one for a column that is no list
}

func (e *WebhookError) Error() string {
	return "column webhooks: " + strings.Join(e.Problems, "; ") + " (the app is served without it)"
}

// webhooksField is the webhooks column: read into App.Webhooks; written by an insert (NULL
// for none) and never by an update, so that the apps API leaves a row's webhooks as they are
// (those herald left out included).
var webhooksField = Field{Names: []string{"webhooks"}, Keep: true, get: webhooksValue, set: setWebhooks}

func webhooksValue(a *herald.App) any {
	if len(a.Webhooks) == 0 {
		return nil
	}
	out := make([]soketiWebhook, len(a.Webhooks))
	for i, w := range a.Webhooks {
		out[i] = soketiWebhook{URL: w.URL, EventTypes: w.EventTypes}
		if len(w.EventTypes) == 0 {
			out[i].EventTypes = webhook.EventTypes // Soketi's empty list sends nothing; herald's means all
		}
		if len(w.Headers) > 0 {
			out[i].Headers = map[string]any{}
			for k, v := range w.Headers {
				out[i].Headers[k] = v
			}
		}
		if w.Filter != (herald.WebhookFilter{}) {
			out[i].Filter = &soketiFilter{w.Filter.ChannelNameStartsWith, w.Filter.ChannelNameEndsWith}
		}
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// setWebhooks reads the column into a.Webhooks, leaving out what herald cannot send (the
// *WebhookError says what).
func setWebhooks(a *herald.App, v any) error {
	list, err := jsonArray(v, "webhooks")
	if err != nil {
		return &WebhookError{Problems: []string{err.Error()}}
	}
	var problems []string
	for i, raw := range list {
		w, bad := readWebhook(raw)
		for _, p := range bad {
			problems = append(problems, fmt.Sprintf("webhooks[%d]: %s", i, p))
		}
		if w != nil {
			a.Webhooks = append(a.Webhooks, *w)
		}
	}
	if len(problems) > 0 {
		return &WebhookError{Problems: problems}
	}
	return nil
}

// readWebhook reads one webhook, checked as the configuration file's are; nil when herald
// cannot send it. Event types herald does not know are ignored (Soketi matches no event
// with them), each a problem.
func readWebhook(raw json.RawMessage) (*herald.Webhook, []string) {
	var sw soketiWebhook
	if err := json.Unmarshal(raw, &sw); err != nil {
		return nil, []string{"left out: not a webhook: " + err.Error()}
	}
	if sw.URL == "" && sw.LambdaFunction != "" {
		return nil, []string{"left out: a Lambda function (lambda_function), which herald does not invoke"}
	}
	if err := webhook.CheckURL(sw.URL); err != nil {
		return nil, []string{"left out: url " + err.Error()}
	}
	w := &herald.Webhook{URL: sw.URL}
	var problems []string
	for _, t := range sw.EventTypes {
		if err := webhook.CheckEventType(t); err != nil {
			problems = append(problems, "event type ignored: "+err.Error())
			continue
		}
		if !slices.Contains(w.EventTypes, t) {
			w.EventTypes = append(w.EventTypes, t)
		}
	}
	if len(w.EventTypes) == 0 { // Soketi sends such a webhook nothing; herald's empty list is every event
		return nil, append(problems, "left out: no event type herald sends in event_types")
	}
	names := make([]string, 0, len(sw.Headers))
	for n := range sw.Headers {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		var v string
		switch x := sw.Headers[n].(type) {
		case string:
			v = x
		case float64, bool:
			v = fmt.Sprint(x)
		default:
			return nil, append(problems, fmt.Sprintf("left out: header %s is not text", n))
		}
		if err := webhook.CheckHeader(n, v); err != nil {
			return nil, append(problems, "left out: header "+err.Error())
		}
		if w.Headers == nil {
			w.Headers = map[string]string{}
		}
		w.Headers[n] = v
	}
	if sw.Filter != nil {
		w.Filter = herald.WebhookFilter{ChannelNameStartsWith: sw.Filter.ChannelNameStartsWith, ChannelNameEndsWith: sw.Filter.ChannelNameEndsWith}
	}
	return w, problems
}

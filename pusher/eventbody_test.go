package pusher

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/herald-rt/herald"
)

func TestEventBody(t *testing.T) {
	for _, c := range []struct {
		body, data string
		chans      []string
		invalid    bool // Targets or EventData fails with herald.CodeInvalid
	}{
		{body: `{"name":"e","channel":"a","data":"{\"x\":1}"}`, data: `{"x":1}`, chans: []string{"a"}},
		{body: `{"name":"e","channels":["a","b"],"data":{"x":1}}`, data: `{"x":1}`, chans: []string{"a", "b"}},
		{body: `{"name":"e","channel":"a","data":null}`, chans: []string{"a"}},
		{body: `{"name":"e","channel":"a"}`, chans: []string{"a"}},
		{body: `{"name":"e","data":" 42 "}`, data: " 42 "},
		{body: `{"name":"e","channel":"a","channels":["b"]}`, invalid: true},
	} {
		var e EventBody
		if err := json.Unmarshal([]byte(c.body), &e); err != nil {
			t.Fatal(err)
		}
		chans, err := e.Targets()
		var data string
		if err == nil {
			data, err = EventData(e.Data)
		}
		switch {
		case c.invalid && herald.CodeOf(err) != herald.CodeInvalid:
			t.Errorf("%s: err %v, want one with CodeInvalid", c.body, err)
		case !c.invalid && (err != nil || data != c.data || !slices.Equal(chans, c.chans)):
			t.Errorf("%s: channels %q, data %q, err %v; want %q, %q", c.body, chans, data, err, c.chans, c.data)
		}
	}
	if _, err := EventData(json.RawMessage(`"\x"`)); herald.CodeOf(err) != herald.CodeInvalid || herald.MessageOf(err)[:6] != "data: " {
		t.Errorf("a string that does not decode: %v", err)
	}
}

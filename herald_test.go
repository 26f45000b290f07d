package herald

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"testing"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		name  string
		kind  ChannelKind
		cache bool
	}{
		{"news", Public, false},
		{"cache-news", Public, true},
		{"private-chat", Private, false},
		{"private-cache-chat", Private, true},
		{"private-encrypted-chat", PrivateEncrypted, false},
		{"private-encrypted-cache-chat", PrivateEncrypted, true},
		{"presence-room", Presence, false},
		{"presence-cache-room", Presence, true},
		{"#server-to-user-42", User, false},
		{"privatechat", Public, false},
	}
	for _, c := range cases {
		got := Classify(c.name)
		if got.Kind != c.kind || got.Cache != c.cache {
			t.Errorf("Classify(%q) = %v cache=%v; want %v cache=%v", c.name, got.Kind, got.Cache, c.kind, c.cache)
		}
	}
}

// TestEveryCodeHasPusherCodeAndStatus reads the Code constants from error.go itself, so a
// code added to the list but left out of either table (a zero entry, or past its end) fails.
func TestEveryCodeHasPusherCodeAndStatus(t *testing.T) {
	codes := codeConstants(t)
	if len(codes) < int(CodeUnavailable)+1 {
		t.Fatalf("found %d Code constants in error.go, want at least %d: %v", len(codes), CodeUnavailable+1, codes)
	}
	if n := len(pusherCodes); n != len(codes) {
		t.Errorf("%d codes, but %d Pusher codes", len(codes), n)
	}
	if n := len(httpStatuses); n != len(codes) {
		t.Errorf("%d codes, but %d HTTP statuses", len(codes), n)
	}
	for i, name := range codes {
		c := Code(i)
		if i >= len(pusherCodes) || pusherCodes[c] == 0 {
			t.Errorf("%s (%d) has no entry in pusherCodes", name, i)
		} else if p := c.PusherCode(); p < 4000 || p > 4399 {
			t.Errorf("%s: Pusher code %d outside 4000-4399", name, p)
		}
		if i >= len(httpStatuses) || httpStatuses[c] == 0 {
			t.Errorf("%s (%d) has no entry in httpStatuses", name, i)
		} else if s := c.HTTPStatus(); s < 400 || s > 599 {
			t.Errorf("%s: HTTP status %d is not an error status", name, s)
		}
	}
	// The codes pusher-js acts on (docs/protocol.md, "Error and close codes").
	for code, want := range map[Code]int{CodeAppNotFound: 4001, CodeAppOverQuota: 4004, CodeOverCapacity: 4100,
		CodeSlowConsumer: 4100, CodePongTimeout: 4201, CodeReconnect: 4200, CodeUnauthorized: 4009, CodeRateLimited: 4301} {
		if got := code.PusherCode(); got != want {
			t.Errorf("code %d: Pusher code %d, want %d", code, got, want)
		}
	}
}

// codeConstants returns the names of the Code constants declared in error.go, in order: the
// const block whose first constant is typed Code and valued iota, each one its index.
func codeConstants(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "error.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST || len(gd.Specs) == 0 {
			continue
		}
		first := gd.Specs[0].(*ast.ValueSpec)
		if typ, ok := first.Type.(*ast.Ident); !ok || typ.Name != "Code" {
			continue
		}
		for i, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			if len(vs.Names) != 1 || (i == 0) != (len(vs.Values) == 1) {
				t.Fatalf("error.go: the Code constants must be one iota list, one name a line; %s is not", vs.Names[0].Name)
			}
			if i == 0 {
				if id, ok := vs.Values[0].(*ast.Ident); !ok || id.Name != "iota" {
					t.Fatalf("error.go: %s must be iota", vs.Names[0].Name)
				}
			}
			names = append(names, vs.Names[0].Name)
		}
	}
	return names
}

func TestCodeOfWrapped(t *testing.T) {
	err := fmt.Errorf("publish: %w", Errorf(CodeTooLarge, "data is %d bytes", 20000))
	if CodeOf(err) != CodeTooLarge || MessageOf(err) != "data is 20000 bytes" {
		t.Fatalf("CodeOf/MessageOf lost the domain error: %v %q", CodeOf(err), MessageOf(err))
	}
	if CodeOf(errors.New("boom")) != CodeInternal || MessageOf(errors.New("boom")) != "internal error" {
		t.Fatal("a plain error must map to CodeInternal with a generic message")
	}
}

// TestLimitsWithDefaults walks every field of Limits, so a field added to Limits but left out
// of WithDefaults or DefaultLimits fails here.
func TestLimitsWithDefaults(t *testing.T) {
	// Fields whose documented default is 0, meaning unlimited.
	unlimited := map[string]bool{"MaxConnections": true, "MaxAPIRequestsPerSecond": true}
	if got := (Limits{}).WithDefaults(); got != DefaultLimits {
		t.Fatalf("Limits{}.WithDefaults() = %+v, want DefaultLimits %+v", got, DefaultLimits)
	}
	typ := reflect.TypeFor[Limits]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Type.Kind() != reflect.Int {
			t.Fatalf("Limits.%s is a %s; this test (and WithDefaults) handle ints only", f.Name, f.Type)
		}
		def := reflect.ValueOf(DefaultLimits).Field(i).Int()
		if def == 0 && !unlimited[f.Name] {
			t.Errorf("DefaultLimits.%s is 0: give it a default (or document 0 as unlimited and list it here)", f.Name)
		}
		if def != 0 && unlimited[f.Name] {
			t.Errorf("DefaultLimits.%s is %d, but this test lists it as unlimited by default", f.Name, def)
		}
		// A field set alone survives WithDefaults; the others take their defaults.
		var l Limits
		reflect.ValueOf(&l).Elem().Field(i).SetInt(def + 7)
		got := reflect.ValueOf(l.WithDefaults())
		if v := got.Field(i).Int(); v != def+7 {
			t.Errorf("WithDefaults dropped Limits.%s: set to %d, got %d", f.Name, def+7, v)
		}
		for j := range typ.NumField() {
			if want := reflect.ValueOf(DefaultLimits).Field(j).Int(); j != i && got.Field(j).Int() != want {
				t.Errorf("with only %s set, WithDefaults gave %s = %d, want its default %d", f.Name, typ.Field(j).Name, got.Field(j).Int(), want)
			}
		}
	}
}

package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

type address struct {
	City string `json:"city" jsonschema:"the city, as spoken"`
	Zip  string `json:"zip,omitempty"`
}

type bookingArgs struct {
	Name      string   `json:"name" jsonschema:"the guest's name"`
	PartySize int      `json:"party_size"`
	Outdoor   bool     `json:"outdoor"`
	Address   address  `json:"address"`
	Tags      []string `json:"tags,omitempty"`
	Note      *string  `json:"note,omitempty"`
	Internal  string   `json:"-"`
}

type booking struct {
	ID    string `json:"id"`
	Party int    `json:"party"`
}

func book(_ context.Context, a bookingArgs) (booking, error) {
	return booking{ID: "B-" + a.Name, Party: a.PartySize}, nil
}

func mustJSON(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("schema is not a JSON object: %v\n%s", err, raw)
	}
	return m
}

func TestNewInfersSchema(t *testing.T) {
	tool, err := New("book_table", "Book a table.", book)
	if err != nil {
		t.Fatal(err)
	}
	got := mustJSON(t, tool.Schema())
	want := mustJSON(t, json.RawMessage(`{
		"type": "object",
		"properties": {
			"name": {"type": "string", "description": "the guest's name"},
			"party_size": {"type": "integer"},
			"outdoor": {"type": "boolean"},
			"address": {
				"type": "object",
				"properties": {
					"city": {"type": "string", "description": "the city, as spoken"},
					"zip": {"type": "string"}
				},
				"required": ["city"],
				"additionalProperties": false
			},
			"tags": {"type": ["null", "array"], "items": {"type": "string"}},
			"note": {"type": ["null", "string"]}
		},
		"required": ["name", "party_size", "outdoor", "address"],
		"additionalProperties": false
	}`))
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", "  ")
		t.Errorf("schema:\n%s\nwant the equivalent of:\n%+v", g, want)
	}

	spec := tool.Spec()
	if spec.Name != "book_table" || spec.Description != "Book a table." {
		t.Errorf("spec = %q, %q", spec.Name, spec.Description)
	}
	if string(spec.Parameters) != string(tool.Schema()) {
		t.Errorf("spec parameters differ from schema")
	}
	// Properties are listed in field order, as the author wrote them.
	s := string(tool.Schema())
	if !(strings.Index(s, `"name"`) < strings.Index(s, `"party_size"`) && strings.Index(s, `"party_size"`) < strings.Index(s, `"outdoor"`)) {
		t.Errorf("properties out of field order: %s", s)
	}
}

func TestSchemaIsACopy(t *testing.T) {
	tool := MustNew("book_table", "", book)
	s := tool.Schema()
	s[0] = 'X'
	if tool.Schema()[0] != '{' {
		t.Fatal("modifying Schema's result changed the tool")
	}
}

func TestNewNoArguments(t *testing.T) {
	tool := MustNew("hang_up", "End the call.", func(context.Context, struct{}) (string, error) { return "bye", nil })
	got := mustJSON(t, tool.Schema())
	// Model APIs want "properties" on an object schema even when it is empty.
	if p, ok := got["properties"].(map[string]any); !ok || len(p) != 0 {
		t.Errorf("properties = %#v, want {}", got["properties"])
	}
	for _, args := range []string{``, `{}`, " \n"} {
		out, err := tool.Run(context.Background(), json.RawMessage(args))
		if err != nil || out != "bye" {
			t.Errorf("Run(%q) = %q, %v", args, out, err)
		}
	}
	if err := tool.Validate(json.RawMessage(`{"x":1}`)); !errors.Is(err, ErrInvalidArguments) || !strings.Contains(err.Error(), "takes no arguments") {
		t.Errorf("Validate with an argument = %v", err)
	}
}

func TestNewDefinitionErrors(t *testing.T) {
	fn := func(context.Context, struct{}) (string, error) { return "", nil }
	for _, name := range []string{"", "has space", "dot.ted", "ünïcode", strings.Repeat("a", 65), "semi;colon"} {
		if _, err := New(name, "", fn); err == nil {
			t.Errorf("New(%q) succeeded, want an invalid-name error", name)
		}
	}
	for _, name := range []string{"a", "get_weather", "Get-Weather-2", strings.Repeat("a", 64)} {
		if _, err := New(name, "", fn); err != nil {
			t.Errorf("New(%q): %v", name, err)
		}
	}
	if _, err := New("x", "", fn, WithTimeout(0)); err == nil {
		t.Error("zero timeout accepted")
	}
	if _, err := New("x", "", fn, WithTimeout(-time.Second)); err == nil {
		t.Error("negative timeout accepted")
	}
	if _, err := New("x", "", fn, WithEffect("sideways")); err == nil {
		t.Error("unknown effect accepted")
	}
	if _, err := New("x", "", func(context.Context, string) (string, error) { return "", nil }); err == nil {
		t.Error("non-struct arguments accepted")
	}
	if _, err := New("x", "", func(context.Context, struct{ C chan int }) (string, error) { return "", nil }); err == nil {
		t.Error("arguments with a channel field accepted")
	}
	if _, err := New[struct{}, string]("x", "", nil); err == nil {
		t.Error("nil function accepted")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("MustNew with a bad name did not panic")
			}
		}()
		MustNew("bad name", "", fn)
	}()
}

func TestOptions(t *testing.T) {
	fn := func(context.Context, struct{}) (string, error) { return "", nil }
	def := MustNew("x", "", fn)
	if def.Timeout() != DefaultTimeout {
		t.Errorf("default timeout = %v, want %v", def.Timeout(), DefaultTimeout)
	}
	if def.Effect() != Mutation {
		t.Errorf("default effect = %q, want %q", def.Effect(), Mutation)
	}
	tool := MustNew("x", "", fn, WithTimeout(2*time.Second), WithEffect(Read))
	if tool.Timeout() != 2*time.Second || tool.Effect() != Read {
		t.Errorf("got %v, %q", tool.Timeout(), tool.Effect())
	}
}

func TestRunTyped(t *testing.T) {
	tool := MustNew("book_table", "", book)
	out, err := tool.Run(context.Background(), json.RawMessage(
		`{"name":"Ada","party_size":4,"outdoor":true,"address":{"city":"Paris"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"id":"B-Ada","party":4}`; out != want {
		t.Errorf("Run = %s, want %s", out, want)
	}

	greet := MustNew("greet", "", func(_ context.Context, a struct {
		Name string `json:"name"`
	}) (string, error) {
		return "hello, " + a.Name, nil
	})
	out, err = greet.Run(context.Background(), json.RawMessage(`{"name":"Ada"}`))
	if err != nil || out != "hello, Ada" {
		t.Errorf("string result: Run = %q, %v; want it as is", out, err)
	}
}

func TestRunInvalidArgumentsSkipsHandler(t *testing.T) {
	called := false
	tool := MustNew("book_table", "", func(ctx context.Context, a bookingArgs) (booking, error) {
		called = true
		return book(ctx, a)
	})
	_, err := tool.Run(context.Background(), json.RawMessage(`{"name":"Ada"}`))
	if !errors.Is(err, ErrInvalidArguments) {
		t.Errorf("Run = %v, want ErrInvalidArguments", err)
	}
	if called {
		t.Error("handler ran with invalid arguments")
	}
}

func TestRunHandlerError(t *testing.T) {
	errFull := errors.New("fully booked")
	tool := MustNew("book", "", func(context.Context, struct{}) (booking, error) {
		return booking{ID: "ignored"}, fmt.Errorf("checking: %w", errFull)
	})
	out, err := tool.Run(context.Background(), nil)
	if !errors.Is(err, errFull) {
		t.Fatalf("Run = %v, want it to wrap %v", err, errFull)
	}
	if out != "" {
		t.Errorf("Run returned %q alongside an error", out)
	}
	if !strings.Contains(err.Error(), `"book"`) {
		t.Errorf("error %q does not name the tool", err)
	}

	// A handler's own semantic rejection stays branchable.
	semantic := MustNew("s", "", func(context.Context, struct{}) (string, error) {
		return "", fmt.Errorf("%w: the date is in the past", ErrInvalidArguments)
	})
	if _, err := semantic.Run(context.Background(), nil); !errors.Is(err, ErrInvalidArguments) {
		t.Errorf("Run = %v, want ErrInvalidArguments", err)
	}
}

func TestRunRecoversPanic(t *testing.T) {
	tool := MustNew("boom", "", func(context.Context, struct{}) (string, error) {
		var m map[string]int
		m["x"] = 1 // a bug in the tool
		return "", nil
	})
	out, err := tool.Run(context.Background(), nil)
	if !errors.Is(err, ErrToolPanicked) {
		t.Fatalf("Run = %q, %v; want ErrToolPanicked", out, err)
	}
	if !strings.Contains(err.Error(), "nil map") {
		t.Errorf("error %q does not carry the panic value", err)
	}

	sentinel := errors.New("sentinel")
	raw, _ := NewRaw("boom2", "", json.RawMessage(`{"type":"object"}`), HandlerFunc(func(context.Context, json.RawMessage) (string, error) {
		panic(sentinel)
	}))
	_, err = raw.Run(context.Background(), nil)
	if !errors.Is(err, ErrToolPanicked) || !errors.Is(err, sentinel) {
		t.Errorf("Run = %v, want ErrToolPanicked wrapping the panicked error", err)
	}
}

func TestRunDoneContextDoesNotStart(t *testing.T) {
	called := false
	tool := MustNew("charge", "", func(context.Context, struct{}) (string, error) {
		called = true
		return "charged", nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tool.Run(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	if called {
		t.Error("handler started after its context was done")
	}
}

func TestRunPassesContext(t *testing.T) {
	tool := MustNew("who", "", func(ctx context.Context, _ struct{}) (string, error) {
		ci, ok := CallInfoFrom(ctx)
		if !ok {
			return "", errors.New("no call info")
		}
		return fmt.Sprintf("%s/%s/%d", ci.ID, ci.Name, ci.Epoch), nil
	})
	ctx := WithCallInfo(context.Background(), CallInfo{ID: "call_1", Name: "who", Epoch: 7})
	out, err := tool.Run(ctx, nil)
	if err != nil || out != "call_1/who/7" {
		t.Errorf("Run = %q, %v", out, err)
	}
}

func TestNewRaw(t *testing.T) {
	schema := json.RawMessage(`{
		"type": "object",
		"properties": {"city": {"type": "string", "minLength": 2}},
		"required": ["city"],
		"additionalProperties": false
	}`)
	var got json.RawMessage
	tool, err := NewRaw("weather", "Get the weather.", schema, HandlerFunc(func(_ context.Context, args json.RawMessage) (string, error) {
		got = args
		return "sunny", nil
	}), WithEffect(Read))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"type":"object","properties":{"city":{"type":"string","minLength":2}},"required":["city"],"additionalProperties":false}`; string(tool.Schema()) != want {
		t.Errorf("Schema = %s, want the author's schema compacted: %s", tool.Schema(), want)
	}
	out, err := tool.Run(context.Background(), json.RawMessage(`{"city":"Oslo"}`))
	if err != nil || out != "sunny" || string(got) != `{"city":"Oslo"}` {
		t.Errorf("Run = %q, %v; handler got %s", out, err, got)
	}
	err = tool.Validate(json.RawMessage(`{"city":"O"}`))
	if !errors.Is(err, ErrInvalidArguments) || !strings.Contains(err.Error(), `field "city" must be at least 2 characters long`) {
		t.Errorf("Validate short city = %v", err)
	}

	h := HandlerFunc(func(context.Context, json.RawMessage) (string, error) { return "", nil })
	for _, bad := range []string{
		``,
		`not json`,
		`{"type":"string"}`,
		`{"properties":{}}`,
		`{"type":"object","properties":{"x":{"type":"strnig"}}}`,
		`{"type":"object","properties":{"x":{"$ref":"https://example.com/remote"}}}`,
	} {
		if _, err := NewRaw("x", "", json.RawMessage(bad), h); err == nil {
			t.Errorf("NewRaw accepted schema %s", bad)
		}
	}
	if _, err := NewRaw("x", "", json.RawMessage(`{"type":"object"}`), nil); err == nil {
		t.Error("NewRaw accepted a nil handler")
	}
}

func TestRunConcurrent(t *testing.T) {
	tool := MustNew("book_table", "", book)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			args := fmt.Sprintf(`{"name":"g%d","party_size":%d,"outdoor":false,"address":{"city":"Rome"}}`, i, i)
			out, err := tool.Run(context.Background(), json.RawMessage(args))
			if want := fmt.Sprintf(`{"id":"B-g%d","party":%d}`, i, i); err != nil || out != want {
				t.Errorf("Run = %q, %v; want %s", out, err, want)
			}
			if err := tool.Validate(json.RawMessage(`{}`)); !errors.Is(err, ErrInvalidArguments) {
				t.Errorf("Validate({}) = %v", err)
			}
		})
	}
	wg.Wait()
}

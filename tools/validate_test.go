package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestValidateRejects(t *testing.T) {
	tool := MustNew("book_table", "", book)
	for _, tc := range []struct {
		name string
		args string
		want []string // substrings of the message, each needed to act on it
	}{
		{"malformed", `{"name": "Ada",`, []string{"not valid JSON"}},
		{"trailing garbage", `{} {}`, []string{"not valid JSON"}},
		{"array", `["Ada", 4]`, []string{"must be a JSON object", "got an array"}},
		{"string", `"Ada"`, []string{"must be a JSON object", `got a string ("Ada")`}},
		{"null", `null`, []string{"must be a JSON object", "got null"}},
		{"missing required", `{"name":"Ada","outdoor":true,"address":{"city":"Oslo"}}`,
			[]string{`missing required field "party_size"`}},
		{"missing nested required", `{"name":"Ada","party_size":2,"outdoor":true,"address":{}}`,
			[]string{`missing required field "address.city"`}},
		{"wrong type", `{"name":"Ada","party_size":"four","outdoor":true,"address":{"city":"Oslo"}}`,
			[]string{`field "party_size" must be an integer`, `got a string ("four")`}},
		{"fraction for integer", `{"name":"Ada","party_size":2.5,"outdoor":true,"address":{"city":"Oslo"}}`,
			[]string{`field "party_size" must be an integer`, "got a number (2.5)"}},
		{"null for required", `{"name":null,"party_size":2,"outdoor":true,"address":{"city":"Oslo"}}`,
			[]string{`field "name" must be a string, got null`}},
		{"wrong nested type", `{"name":"Ada","party_size":2,"outdoor":true,"address":{"city":7}}`,
			[]string{`field "address.city" must be a string`, "got an integer (7)"}},
		{"wrong item type", `{"name":"Ada","party_size":2,"outdoor":true,"address":{"city":"Oslo"},"tags":["a",3]}`,
			[]string{`field "tags[1]" must be a string`}},
		{"wrong slice type", `{"name":"Ada","party_size":2,"outdoor":true,"address":{"city":"Oslo"},"tags":"a"}`,
			[]string{`field "tags" must be an array or null`}},
		{"unknown field", `{"name":"Ada","party_size":2,"outdoor":true,"address":{"city":"Oslo"},"time":"8pm"}`,
			[]string{`unknown field "time"`, `"name", "party_size", "outdoor", "address", "tags", "note"`}},
		{"wrong case", `{"Name":"Ada","party_size":2,"outdoor":true,"address":{"city":"Oslo"}}`,
			[]string{`unknown field "Name"`, `missing required field "name"`}},
		{"unknown nested field", `{"name":"Ada","party_size":2,"outdoor":true,"address":{"city":"Oslo","country":"NO"}}`,
			[]string{`unknown field "address.country"`, `"city", "zip"`}},
		{"several unknown fields", `{"name":"Ada","party_size":2,"outdoor":true,"address":{"city":"Oslo"},"time":"8pm","date":"today"}`,
			[]string{`unknown fields "date", "time": the fields are`}},
		{"several missing", `{"outdoor":true,"address":{"city":"Oslo"}}`,
			[]string{`missing required fields "name", "party_size"`}},
		{"several problems", `{"party_size":"2","outdoor":"yes","address":{"city":"Oslo"}}`,
			[]string{`missing required field "name"`, `field "party_size" must be an integer`, `field "outdoor" must be a boolean`}},
		{"too big for int", `{"name":"Ada","party_size":1e300,"outdoor":true,"address":{"city":"Oslo"}}`,
			[]string{`field "party_size" is out of range, got 1e300`}},
		// JSON Schema calls 2.0 an integer; Go's decoder will not put it in an int.
		{"integer with a decimal point", `{"name":"Ada","party_size":2.0,"outdoor":true,"address":{"city":"Oslo"}}`,
			[]string{`field "party_size" must be a whole number written without a decimal point or exponent, got 2.0`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tool.Validate(json.RawMessage(tc.args))
			if !errors.Is(err, ErrInvalidArguments) {
				t.Fatalf("Validate(%s) = %v, want ErrInvalidArguments", tc.args, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, `"book_table"`) {
				t.Errorf("message %q does not name the tool", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
			if _, err := tool.Run(context.Background(), json.RawMessage(tc.args)); !errors.Is(err, ErrInvalidArguments) {
				t.Errorf("Run(%s) = %v, want ErrInvalidArguments", tc.args, err)
			}
		})
	}
}

func TestValidateAccepts(t *testing.T) {
	tool := MustNew("book_table", "", book)
	for _, args := range []string{
		`{"name":"Ada","party_size":2,"outdoor":false,"address":{"city":"Oslo"}}`,
		`{"name":"","party_size":0,"outdoor":false,"address":{"city":"","zip":"0150"}}`,
		`{"name":"Ada","party_size":2,"outdoor":true,"address":{"city":"Oslo"},"tags":["window"],"note":"birthday"}`,
		`{"name":"Ada","party_size":2,"outdoor":true,"address":{"city":"Oslo"},"tags":null,"note":null}`,
		` {"address":{"city":"Oslo"},"outdoor":true,"party_size":-3,"name":"Ada"} `,
	} {
		if err := tool.Validate(json.RawMessage(args)); err != nil {
			t.Errorf("Validate(%s) = %v", args, err)
		}
	}
}

func TestValidateCapsProblems(t *testing.T) {
	tool := MustNew("book_table", "", book)
	err := tool.Validate(json.RawMessage(`{"name":1,"party_size":"x","outdoor":1,"address":1,"tags":1,"note":1}`))
	if !errors.Is(err, ErrInvalidArguments) {
		t.Fatal(err)
	}
	if n := strings.Count(err.Error(), "; ") + 1; n != maxProblems {
		t.Errorf("%d problems listed, want %d: %v", n, maxProblems, err)
	}
}

func TestValidateRawKeywords(t *testing.T) {
	tool, err := NewRaw("transfer", "", json.RawMessage(`{
		"type": "object",
		"properties": {
			"department": {"type": "string", "enum": ["sales", "support"]},
			"priority": {"type": "integer", "minimum": 1, "maximum": 5},
			"phone": {"type": "string", "pattern": "^\\+[0-9]+$"},
			"notes": {"type": "array", "items": {"type": "string"}, "maxItems": 2}
		},
		"required": ["department"]
	}`), HandlerFunc(func(context.Context, json.RawMessage) (string, error) { return "ok", nil }))
	if err != nil {
		t.Fatal(err)
	}
	for args, want := range map[string]string{
		`{"department":"billing"}`:                     `field "department" must be one of "sales", "support", got a string ("billing")`,
		`{"department":"sales","priority":0}`:          `field "priority" must be at least 1, got 0`,
		`{"department":"sales","priority":9}`:          `field "priority" must be at most 5, got 9`,
		`{"department":"sales","phone":"555"}`:         `field "phone" must match the pattern ^\+[0-9]+$`,
		`{"department":"sales","notes":["a","b","c"]}`: `field "notes" must have at most 2 items, got 3`,
	} {
		err := tool.Validate(json.RawMessage(args))
		if !errors.Is(err, ErrInvalidArguments) || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate(%s) = %v\nwant a message containing %s", args, err, want)
		}
	}
	// No additionalProperties: false, so extra fields are the author's choice.
	if err := tool.Validate(json.RawMessage(`{"department":"sales","extra":1}`)); err != nil {
		t.Errorf("Validate with an allowed extra field = %v", err)
	}
}

func TestValidateAlternatives(t *testing.T) {
	tool, err := NewRaw("lookup", "", json.RawMessage(`{
		"type": "object",
		"properties": {"order_id": {"type": "string"}, "phone": {"type": "string"}},
		"anyOf": [{"required": ["order_id"]}, {"required": ["phone"]}]
	}`), HandlerFunc(func(context.Context, json.RawMessage) (string, error) { return "ok", nil }))
	if err != nil {
		t.Fatal(err)
	}
	err = tool.Validate(json.RawMessage(`{}`))
	want := `arguments must fit one of the accepted forms (form 1: missing required field "order_id"; form 2: missing required field "phone")`
	if !errors.Is(err, ErrInvalidArguments) || !strings.Contains(err.Error(), want) {
		t.Errorf("Validate = %v\nwant a message containing %s", err, want)
	}
	if err := tool.Validate(json.RawMessage(`{"phone":"+4712345678"}`)); err != nil {
		t.Errorf("Validate = %v", err)
	}
}

func TestValidateFallsBackToValidatorMessage(t *testing.T) {
	// dependentRequired is beyond the explainer; the validator's verdict
	// still stands, in its own words.
	tool, err := NewRaw("pay", "", json.RawMessage(`{
		"type": "object",
		"dependentRequired": {"card": ["expiry"]}
	}`), HandlerFunc(func(context.Context, json.RawMessage) (string, error) { return "ok", nil }))
	if err != nil {
		t.Fatal(err)
	}
	err = tool.Validate(json.RawMessage(`{"card":"4242"}`))
	if !errors.Is(err, ErrInvalidArguments) {
		t.Fatalf("Validate = %v, want ErrInvalidArguments", err)
	}
	if msg := err.Error(); !strings.Contains(msg, `"expiry"`) || strings.Contains(msg, "validating ") {
		t.Errorf("message %q: want the validator's reason without its schema paths", msg)
	}
	if err := tool.Validate(json.RawMessage(`{"card":"4242","expiry":"12/30"}`)); err != nil {
		t.Errorf("Validate = %v", err)
	}
}

// when has a field whose decoding the schema cannot vouch for: the schema
// says string, time.Time wants RFC 3339.
type when struct {
	At time.Time `json:"at"`
}

func TestValidateDecodes(t *testing.T) {
	tool := MustNew("remind", "", func(_ context.Context, w when) (string, error) { return w.At.Format(time.Kitchen), nil })
	err := tool.Validate(json.RawMessage(`{"at":"tomorrow"}`))
	if !errors.Is(err, ErrInvalidArguments) || !strings.Contains(err.Error(), "tomorrow") {
		t.Errorf("Validate = %v, want ErrInvalidArguments quoting the value", err)
	}
	out, err := tool.Run(context.Background(), json.RawMessage(`{"at":"2025-01-02T15:04:00Z"}`))
	if err != nil || out != "3:04PM" {
		t.Errorf("Run = %q, %v", out, err)
	}
}

type fuzzArgs struct {
	S  string            `json:"s"`
	N  int8              `json:"n"`
	F  float64           `json:"f,omitempty"`
	B  bool              `json:"b,omitempty"`
	L  []int             `json:"l,omitempty"`
	M  map[string]string `json:"m,omitempty"`
	In *struct {
		X uint `json:"x"`
	} `json:"in,omitempty"`
}

func FuzzValidate(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `"s"`, `1`, `{`, `{"s":"a","n":1}`, `{"s":"a","n":200}`,
		`{"s":"a","n":-1,"f":1.5,"b":true,"l":[1,2],"m":{"k":"v"},"in":{"x":3}}`,
		`{"s":"a","n":1,"in":{"x":-1}}`, `{"s":"a","n":1,"l":[1.5]}`, `{"s":"\ud800","n":1}`,
		`{"s":"a","n":1,"S":"b"}`, `{"s":"a","n":1,"in":null,"l":null}`, `{"s":"a","n":1e400}`,
	} {
		f.Add([]byte(s))
	}
	tool := MustNew("fuzz", "", func(_ context.Context, a fuzzArgs) (fuzzArgs, error) { return a, nil })
	f.Fuzz(func(t *testing.T, data []byte) {
		// Independently of the explainer: what is not a JSON object (empty
		// input aside, which means {}) is invalid.
		var v any
		notObject := len(bytes.TrimSpace(data)) > 0 && json.Unmarshal(data, &v) != nil
		if _, ok := v.(map[string]any); len(bytes.TrimSpace(data)) > 0 && !ok {
			notObject = true
		}
		verr := tool.Validate(data)
		if notObject && !errors.Is(verr, ErrInvalidArguments) {
			t.Fatalf("Validate(%q) = %v, want ErrInvalidArguments", data, verr)
		}
		out, rerr := tool.Run(context.Background(), data)
		if (verr == nil) != (rerr == nil) {
			t.Fatalf("Validate = %v but Run = %v", verr, rerr)
		}
		if verr != nil {
			if !errors.Is(verr, ErrInvalidArguments) || !errors.Is(rerr, ErrInvalidArguments) {
				t.Fatalf("invalid input gave Validate = %v, Run = %v; want ErrInvalidArguments", verr, rerr)
			}
			return
		}
		// What passed reached the handler, decoded, and came back.
		var a fuzzArgs
		if err := json.Unmarshal([]byte(out), &a); err != nil {
			t.Fatalf("handler result %q: %v", out, err)
		}
	})
}

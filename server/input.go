package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// MaxTextBytes is the most typed text one input may carry, in bytes of
// UTF-8, on HTTP (POST /v1/sessions/{id}/input) and on the data channel
// alike: one limit, so a client cannot get past it by changing transport.
// A typed turn is a sentence or a paragraph; more is a paste gone wrong or
// an attempt to fill the model's context.
const MaxTextBytes = 16 << 10

// maxInputMessage bounds the JSON that carries one typed input. Every text
// within MaxTextBytes fits even with each byte escaped (\u00XX is six), so
// the envelope's bound never refuses a text the limit allows.
const maxInputMessage = 6*MaxTextBytes + 1<<10

// Typed input is refused with these (wrapped with the detail).
var (
	ErrTextTooLong = fmt.Errorf("typed text is over the limit of %d bytes", MaxTextBytes)
	ErrTextEmpty   = errors.New("typed text is empty")
)

// checkText applies the typed-input rules every transport shares.
func checkText(text string) error {
	if len(text) > MaxTextBytes {
		return fmt.Errorf("%w (this one is %d)", ErrTextTooLong, len(text))
	}
	if strings.TrimSpace(text) == "" {
		return fmt.Errorf(`%w: send {"text": "..."} with some words`, ErrTextEmpty)
	}
	return nil
}

// jsonProblem says what is wrong with msg, a JSON message that did not
// decode (err), in terms of the message rather than of the Go types it is
// decoded into.
func jsonProblem(msg []byte, err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case len(bytes.TrimSpace(msg)) == 0:
		return "the message is empty"
	case errors.As(err, &syn) && syn.Offset >= int64(len(msg)):
		return fmt.Sprintf("the JSON ends early, at byte %d", syn.Offset)
	case errors.As(err, &syn):
		return fmt.Sprintf("not valid JSON at byte %d: %s", syn.Offset, strings.TrimPrefix(syn.Error(), "json: "))
	case errors.As(err, &typ):
		if typ.Field == "" {
			return fmt.Sprintf("want a JSON object, not a %s", typ.Value)
		}
		return fmt.Sprintf("field %s must be %s, not a %s", typ.Field, jsonTypeName(typ.Type), typ.Value)
	}
	return "not valid JSON: " + err.Error()
}

func jsonTypeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return t.String()
}

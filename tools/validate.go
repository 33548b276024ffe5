package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
)

// maxProblems bounds how many problems one error lists: enough for the model
// to fix several mistakes in one retry, few enough to keep the message short.
const maxProblems = 5

// Validate checks model-produced arguments against the tool's schema. Empty
// args count as the empty object, as in [llm.CallAccumulator]. Malformed JSON,
// a value that is not an object, a missing required field, a value of the
// wrong type or out of range, or an unknown field yields an error wrapping
// [ErrInvalidArguments] whose message says which field is wrong and how.
//
// Validate is the judge of what is valid; the message is an explanation of
// its verdict, written for the model.
func (t *Tool) Validate(args json.RawMessage) error {
	_, err := t.validate(args)
	return err
}

// validate returns the arguments to hand the handler: args, or {} for empty.
func (t *Tool) validate(args json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		return nil, t.invalid(describeDecodeError(err))
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, t.invalid("arguments must be a JSON object, got " + describe(v))
	}
	if err := t.resolved.Validate(v); err != nil {
		var e explainer
		e.walk(t.resolved.Schema(), v, "")
		if len(e.problems) == 0 {
			// The schema uses something the explainer does not follow
			// ($ref, dependentRequired, ...): the validator's own words
			// will have to do.
			e.problems = append(e.problems, trimValidating(err.Error()))
		}
		return nil, t.invalid(e.problems...)
	}
	if t.check != nil {
		if err := t.runCheck(args); err != nil {
			return nil, err
		}
	}
	return args, nil
}

func (t *Tool) runCheck(args json.RawMessage) (err error) {
	defer func() {
		// Only a custom UnmarshalJSON in the arguments type can panic here.
		if p := recover(); p != nil {
			err = panicError(t.name, p)
		}
	}()
	if err := t.check(args); err != nil {
		return t.invalid(describeDecodeError(err))
	}
	return nil
}

func (t *Tool) invalid(problems ...string) error {
	return fmt.Errorf("%w for tool %q: %s", ErrInvalidArguments, t.name, strings.Join(problems, "; "))
}

func describeDecodeError(err error) string {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Sprintf("arguments are not valid JSON (%s at byte %d)", syn, syn.Offset)
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		lit, isNum := strings.CutPrefix(typ.Value, "number ")
		switch {
		case typ.Field == "":
			return fmt.Sprintf("arguments could not be read: %s is out of range", typ.Value)
		case !isNum || typ.Type == nil:
			return fmt.Sprintf("field %q has the wrong type (%s)", typ.Field, typ.Value)
		case fitsInteger(lit, typ.Type):
			// The schema's "integer" admits 2.0 and 2e0; Go's decoder does not.
			return fmt.Sprintf("field %q must be a whole number written without a decimal point or exponent, got %s", typ.Field, lit)
		default:
			return fmt.Sprintf("field %q is out of range, got %s", typ.Field, lit)
		}
	}
	return "arguments could not be read: " + trimJSONPrefix(err)
}

func trimJSONPrefix(err error) string {
	return strings.TrimPrefix(err.Error(), "json: ")
}

// fitsInteger reports whether the number literal lit is a whole number that
// an integer of type t can hold.
func fitsInteger(lit string, t reflect.Type) bool {
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || f != math.Trunc(f) {
		return false
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		limit := math.Ldexp(1, t.Bits()-1)
		return f >= -limit && f < limit
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return f >= 0 && f < math.Ldexp(1, t.Bits())
	}
	return false
}

// trimValidating drops the validator's "validating /schema/path: " prefixes,
// which point into the schema, not into the arguments the model wrote.
func trimValidating(msg string) string {
	msg = validatingPrefix.ReplaceAllString(msg, "")
	return strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", "; ")), " ")
}

var validatingPrefix = regexp.MustCompile(`validating \S+: `)

// explainer walks a value that failed validation and says, in terms of the
// value's own fields, what is wrong with it. It understands the keywords a
// tool schema commonly uses; the validator remains the authority.
type explainer struct {
	problems []string
}

func (e *explainer) add(format string, args ...any) {
	if len(e.problems) < maxProblems {
		e.problems = append(e.problems, fmt.Sprintf(format, args...))
	}
}

func (e *explainer) walk(s *jsonschema.Schema, v any, path string) {
	if s == nil || len(e.problems) >= maxProblems {
		return
	}
	types := s.Types
	if s.Type != "" {
		types = []string{s.Type}
	}
	if len(types) > 0 && !slices.ContainsFunc(types, func(t string) bool { return hasType(v, t) }) {
		e.add("%s must be %s, got %s", subject(path), typeWords(types), describe(v))
		return
	}
	if s.Enum != nil && !slices.ContainsFunc(s.Enum, func(x any) bool { return jsonschema.Equal(x, v) }) {
		e.add("%s must be one of %s, got %s", subject(path), list(s.Enum), describe(v))
		return
	}
	if s.Const != nil && !jsonschema.Equal(*s.Const, v) {
		e.add("%s must be %s, got %s", subject(path), literal(*s.Const), describe(v))
		return
	}
	for _, s := range s.AllOf {
		e.walk(s, v, path)
	}
	e.alternatives(s.AnyOf, v, path)
	e.alternatives(s.OneOf, v, path)
	switch v := v.(type) {
	case float64:
		e.number(s, v, path)
	case string:
		e.string(s, v, path)
	case []any:
		e.array(s, v, path)
	case map[string]any:
		e.object(s, v, path)
	}
}

// alternatives explains a value that fits none of the schemas in alts by
// saying what it lacks for each.
func (e *explainer) alternatives(alts []*jsonschema.Schema, v any, path string) {
	if len(alts) == 0 {
		return
	}
	forms := make([]string, 0, len(alts))
	for i, s := range alts {
		var sub explainer
		sub.walk(s, v, path)
		if len(sub.problems) == 0 {
			return // this one fits, as far as the explainer can tell
		}
		forms = append(forms, fmt.Sprintf("form %d: %s", i+1, strings.Join(sub.problems, " and ")))
	}
	e.add("%s must fit one of the accepted forms (%s)", subject(path), strings.Join(forms, "; "))
}

func (e *explainer) number(s *jsonschema.Schema, v float64, path string) {
	switch {
	case s.Minimum != nil && v < *s.Minimum:
		e.add("%s must be at least %s, got %s", subject(path), num(*s.Minimum), num(v))
	case s.Maximum != nil && v > *s.Maximum:
		e.add("%s must be at most %s, got %s", subject(path), num(*s.Maximum), num(v))
	case s.ExclusiveMinimum != nil && v <= *s.ExclusiveMinimum:
		e.add("%s must be greater than %s, got %s", subject(path), num(*s.ExclusiveMinimum), num(v))
	case s.ExclusiveMaximum != nil && v >= *s.ExclusiveMaximum:
		e.add("%s must be less than %s, got %s", subject(path), num(*s.ExclusiveMaximum), num(v))
	case s.MultipleOf != nil && *s.MultipleOf != 0 && math.Mod(v, *s.MultipleOf) != 0:
		e.add("%s must be a multiple of %s, got %s", subject(path), num(*s.MultipleOf), num(v))
	}
}

func (e *explainer) string(s *jsonschema.Schema, v string, path string) {
	n := utf8.RuneCountInString(v)
	switch {
	case s.MinLength != nil && n < *s.MinLength:
		e.add("%s must be at least %d characters long, got %d", subject(path), *s.MinLength, n)
	case s.MaxLength != nil && n > *s.MaxLength:
		e.add("%s must be at most %d characters long, got %d", subject(path), *s.MaxLength, n)
	case s.Pattern != "":
		if re, err := regexp.Compile(s.Pattern); err == nil && !re.MatchString(v) {
			e.add("%s must match the pattern %s, got %s", subject(path), s.Pattern, describe(v))
		}
	}
}

func (e *explainer) array(s *jsonschema.Schema, v []any, path string) {
	switch {
	case s.MinItems != nil && len(v) < *s.MinItems:
		e.add("%s must have at least %d items, got %d", subject(path), *s.MinItems, len(v))
	case s.MaxItems != nil && len(v) > *s.MaxItems:
		e.add("%s must have at most %d items, got %d", subject(path), *s.MaxItems, len(v))
	}
	for i, item := range v {
		is := s.Items
		if i < len(s.PrefixItems) {
			is = s.PrefixItems[i]
		}
		e.walk(is, item, path+"["+strconv.Itoa(i)+"]")
	}
}

func (e *explainer) object(s *jsonschema.Schema, v map[string]any, path string) {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	known := propertyOrder(s)

	// Patterns can admit names the explainer would call unknown.
	if len(s.PatternProperties) == 0 {
		var unknown []string
		for _, k := range keys {
			if _, ok := s.Properties[k]; ok {
				continue
			}
			if isFalse(s.AdditionalProperties) {
				unknown = append(unknown, join(path, k))
			} else {
				e.walk(s.AdditionalProperties, v[k], join(path, k))
			}
		}
		switch {
		case len(unknown) == 0:
		case len(known) == 0:
			e.add("%s: this takes no arguments", plural("unknown field", unknown))
		default:
			e.add("%s: the fields are %s", plural("unknown field", unknown), quoteAll(known))
		}
	}
	var missing []string
	for _, k := range s.Required {
		if _, ok := v[k]; !ok {
			missing = append(missing, join(path, k))
		}
	}
	if len(missing) > 0 {
		e.add("%s", plural("missing required field", missing))
	}
	for _, k := range known {
		if x, ok := v[k]; ok {
			e.walk(s.Properties[k], x, join(path, k))
		}
	}
}

// propertyOrder lists s's properties in the order the schema gives them,
// which is the order a reader of the schema expects to hear about them.
func propertyOrder(s *jsonschema.Schema) []string {
	out := make([]string, 0, len(s.Properties))
	for _, k := range s.PropertyOrder {
		if _, ok := s.Properties[k]; ok && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	rest := make([]string, 0, len(s.Properties)-len(out))
	for k := range s.Properties {
		if !slices.Contains(out, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}

// isFalse reports whether s is a schema nothing matches, which is how the
// schema package represents "additionalProperties": false.
func isFalse(s *jsonschema.Schema) bool {
	return s != nil && s.Not != nil && reflect.ValueOf(*s.Not).IsZero()
}

func hasType(v any, t string) bool {
	switch v := v.(type) {
	case nil:
		return t == "null"
	case bool:
		return t == "boolean"
	case float64:
		return t == "number" || t == "integer" && v == math.Trunc(v) && !math.IsInf(v, 0)
	case string:
		return t == "string"
	case []any:
		return t == "array"
	case map[string]any:
		return t == "object"
	}
	return false
}

func typeWords(types []string) string {
	// Name null last: "an array or null" reads as "an array, or leave it out".
	ts := slices.Clone(types)
	slices.SortStableFunc(ts, func(a, b string) int {
		switch {
		case a == "null" && b != "null":
			return 1
		case a != "null" && b == "null":
			return -1
		}
		return 0
	})
	words := make([]string, len(ts))
	for i, t := range ts {
		words[i] = article(t)
	}
	return strings.Join(words, " or ")
}

func article(t string) string {
	switch t {
	case "null":
		return "null"
	case "integer", "array", "object":
		return "an " + t
	}
	return "a " + t
}

// describe names a value's JSON type and, for a scalar, the value itself.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean (" + strconv.FormatBool(v) + ")"
	case float64:
		if v == math.Trunc(v) && !math.IsInf(v, 0) {
			return "an integer (" + num(v) + ")"
		}
		return "a number (" + num(v) + ")"
	case string:
		return "a string (" + literal(v) + ")"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// literal renders a JSON value briefly, as the model would have written it.
func literal(v any) string {
	if s, ok := v.(string); ok && utf8.RuneCountInString(s) > 40 {
		v = string([]rune(s)[:40]) + "…"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func list(vs []any) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = literal(v)
	}
	return strings.Join(parts, ", ")
}

// plural renders "unknown field "a"" or "unknown fields "a", "b"".
func plural(noun string, names []string) string {
	if len(names) > 1 {
		noun += "s"
	}
	return noun + " " + quoteAll(names)
}

func quoteAll(names []string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = strconv.Quote(n)
	}
	return strings.Join(parts, ", ")
}

func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func subject(path string) string {
	if path == "" {
		return "arguments"
	}
	return fmt.Sprintf("field %q", path)
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// checkTypes rejects type names JSON Schema does not have; the schema package
// accepts them and then fails every call, far from the typo.
func checkTypes(s *jsonschema.Schema) error {
	if s == nil {
		return nil
	}
	types := s.Types
	if s.Type != "" {
		types = []string{s.Type}
	}
	for _, t := range types {
		switch t {
		case "null", "boolean", "integer", "number", "string", "array", "object":
		default:
			return fmt.Errorf("unknown type %q", t)
		}
	}
	var subs []*jsonschema.Schema
	subs = append(subs, s.Items, s.AdditionalProperties, s.Not, s.If, s.Then, s.Else, s.Contains, s.PropertyNames)
	subs = append(subs, s.PrefixItems...)
	subs = append(subs, s.AllOf...)
	subs = append(subs, s.AnyOf...)
	subs = append(subs, s.OneOf...)
	for _, m := range []map[string]*jsonschema.Schema{s.Properties, s.PatternProperties, s.Defs, s.Definitions} {
		for _, sub := range m {
			subs = append(subs, sub)
		}
	}
	for _, sub := range subs {
		if err := checkTypes(sub); err != nil {
			return err
		}
	}
	return nil
}

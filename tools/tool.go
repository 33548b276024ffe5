package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/holdline/holdline/llm"
)

// Effect says what running a tool does to the world, which decides whether the
// session may run a call again (after an interruption, a timeout or a retry).
type Effect string

// Effects.
const (
	// Read leaves the world as it was: running it twice is as good as once.
	Read Effect = "read"
	// Mutation changes the world (books, cancels, sends, charges): running it
	// twice may do the thing twice.
	Mutation Effect = "mutation"
)

// DefaultTimeout is the deadline of a tool built without [WithTimeout]. Every
// tool has one: a caller on the line cannot wait forever.
const DefaultTimeout = 10 * time.Second

// Errors callers can branch on with [errors.Is].
var (
	// ErrInvalidArguments reports arguments that do not fit the tool's schema.
	// The error's message is written for the model: it names the offending
	// field and says what is wrong. Handlers may wrap it too, for checks no
	// schema can express (a date in the past, an unknown order number).
	ErrInvalidArguments = errors.New("invalid arguments")
	// ErrToolPanicked reports a handler that panicked; Run recovers it.
	ErrToolPanicked = errors.New("tool panicked")
	// ErrUnknownTool reports a call naming a tool the session does not have.
	ErrUnknownTool = errors.New("unknown tool")
)

// Handler runs a call. args is the validated JSON object from the model; the
// returned string is what the model is shown.
//
// A handler should return promptly once ctx is done: the session stops
// waiting at the tool's deadline and may abandon a handler that does not.
type Handler interface {
	Call(ctx context.Context, args json.RawMessage) (string, error)
}

// HandlerFunc adapts a function to [Handler].
type HandlerFunc func(ctx context.Context, args json.RawMessage) (string, error)

// Call calls f(ctx, args).
func (f HandlerFunc) Call(ctx context.Context, args json.RawMessage) (string, error) {
	return f(ctx, args)
}

// Option configures a tool at construction.
type Option func(*config)

type config struct {
	effect    Effect
	timeout   time.Duration
	policy    Policy
	noDedupe  bool
	reconcile Reconciler
	early     bool
}

// WithEffect sets the tool's effect. Without it a tool is a [Mutation]: a tool
// wrongly believed safe to repeat could book twice, one wrongly believed
// unsafe only costs a retry.
func WithEffect(e Effect) Option {
	return func(c *config) { c.effect = e }
}

// WithTimeout sets the tool's deadline, [DefaultTimeout] without it. A
// non-positive d makes construction fail.
func WithTimeout(d time.Duration) Option {
	return func(c *config) { c.timeout = d }
}

// WithInterruptPolicy sets what happens to a call when the user interrupts
// the turn that made it. Without it the policy follows the effect: a [Read]
// completes, a [Mutation] is deferred until its preamble has played.
func WithInterruptPolicy(p Policy) Option {
	return func(c *config) { c.policy = p }
}

// WithDedupe turns off (false) or on (true, the default) the at-most-once
// rule for a mutation: a call repeating an earlier call's arguments gets the
// earlier outcome instead of running again. Turn it off for a tool where the
// same arguments twice mean two things ("add one more coffee").
func WithDedupe(on bool) Option {
	return func(c *config) { c.noDedupe = !on }
}

// WithReconcile sets the hook asked when a mutation's outcome is unknown (it
// was abandoned at its deadline, or the process died while it ran) and the
// same call comes again: it finds out from the world whether the action
// happened, so the session neither repeats it nor pretends it did.
func WithReconcile(r Reconciler) Option {
	return func(c *config) { c.reconcile = r }
}

// WithSpeculative lets a [Read] start on a speculative answer: one the
// model gives while the caller may still go on speaking, before their turn
// is committed. The body may then run for words the caller goes on to
// change, and its result is thrown away; declare it only for a read that
// costs nothing to repeat and tells nobody anything (a menu, a schedule,
// an account looked up by the caller's number). Without it, no call of a
// speculative answer starts before the turn is committed, and a mutation
// never does: construction fails if a [Mutation] asks for it.
func WithSpeculative() Option {
	return func(c *config) { c.early = true }
}

// A Tool is a function the model may call. It is immutable and safe for
// concurrent use.
type Tool struct {
	name        string
	description string
	effect      Effect
	timeout     time.Duration
	policy      Policy
	dedupe      bool
	reconcile   Reconciler
	speculative bool
	schema      json.RawMessage
	resolved    *jsonschema.Resolved
	handler     Handler
	// check, when set, decodes validated arguments the way the handler will,
	// so that Validate also catches what the schema cannot (an integer too
	// large for an int field, a malformed time).
	check func(args json.RawMessage) error
}

// validName is what model APIs accept as a function name.
var validName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// New makes a tool from a typed function. A must be a struct: it is the
// arguments object, and its JSON schema is inferred from it. JSON tags name the
// properties, a `jsonschema:"..."` tag describes one to the model, fields
// without omitempty (or omitzero) are required, and unknown properties are
// rejected. The result is marshalled to JSON for the model, except a result
// of type string, which is shown as is.
func New[A, R any](name, description string, fn func(ctx context.Context, args A) (R, error), opts ...Option) (*Tool, error) {
	if fn == nil {
		return nil, fmt.Errorf("tools: %q: nil function", name)
	}
	if t := reflect.TypeFor[A](); t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("tools: %q: arguments type %v is not a struct", name, t)
	}
	s, err := jsonschema.For[A](nil)
	if err != nil {
		return nil, fmt.Errorf("tools: %q: inferring schema: %w", name, err)
	}
	// Some model APIs reject an object schema without "properties", which
	// is what a struct with no exported fields would give.
	if s.Properties == nil {
		s.Properties = map[string]*jsonschema.Schema{}
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("tools: %q: encoding schema: %w", name, err)
	}
	t, err := newTool(name, description, s, raw, typed(fn), opts)
	if err != nil {
		return nil, err
	}
	t.check = func(args json.RawMessage) error {
		var a A
		return json.Unmarshal(args, &a)
	}
	return t, nil
}

// MustNew is like [New] but panics if the definition is wrong. It is meant for
// tools defined at initialization, where such an error is a programming error.
func MustNew[A, R any](name, description string, fn func(ctx context.Context, args A) (R, error), opts ...Option) *Tool {
	t, err := New(name, description, fn, opts...)
	if err != nil {
		panic(err)
	}
	return t
}

// NewRaw makes a tool from a hand-written JSON schema, which must describe an
// object, and a Handler.
func NewRaw(name, description string, schema json.RawMessage, h Handler, opts ...Option) (*Tool, error) {
	if h == nil {
		return nil, fmt.Errorf("tools: %q: nil handler", name)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, fmt.Errorf("tools: %q: parsing schema: %w", name, err)
	}
	if s.Type != "object" {
		return nil, fmt.Errorf("tools: %q: schema must have type \"object\", the arguments are an object", name)
	}
	if err := checkTypes(&s); err != nil {
		return nil, fmt.Errorf("tools: %q: schema: %w", name, err)
	}
	// Keep the author's schema as written (keywords, order) rather than our
	// re-encoding of it; only the whitespace goes.
	var buf bytes.Buffer
	if err := json.Compact(&buf, schema); err != nil {
		return nil, fmt.Errorf("tools: %q: parsing schema: %w", name, err)
	}
	return newTool(name, description, &s, buf.Bytes(), h, opts)
}

func newTool(name, description string, s *jsonschema.Schema, raw json.RawMessage, h Handler, opts []Option) (*Tool, error) {
	if !validName.MatchString(name) {
		return nil, fmt.Errorf("tools: invalid name %q: want 1 to 64 letters, digits, '_' or '-'", name)
	}
	c := config{effect: Mutation, timeout: DefaultTimeout}
	for _, o := range opts {
		o(&c)
	}
	if c.effect != Read && c.effect != Mutation {
		return nil, fmt.Errorf("tools: %q: unknown effect %q", name, c.effect)
	}
	if c.timeout <= 0 {
		return nil, fmt.Errorf("tools: %q: timeout %v is not positive", name, c.timeout)
	}
	if c.early && c.effect != Read {
		return nil, fmt.Errorf("tools: %q: only a read may start on a speculative answer (WithSpeculative)", name)
	}
	if c.policy == "" {
		c.policy = DefaultPolicy(c.effect)
	}
	if !c.policy.valid() {
		return nil, fmt.Errorf("tools: %q: unknown interrupt policy %q", name, c.policy)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("tools: %q: resolving schema: %w", name, err)
	}
	return &Tool{
		name:        name,
		description: description,
		effect:      c.effect,
		timeout:     c.timeout,
		policy:      c.policy,
		dedupe:      c.effect == Mutation && !c.noDedupe,
		reconcile:   c.reconcile,
		speculative: c.early,
		schema:      raw,
		resolved:    rs,
		handler:     h,
	}, nil
}

// typed adapts a typed function to a Handler.
func typed[A, R any](fn func(context.Context, A) (R, error)) HandlerFunc {
	return func(ctx context.Context, args json.RawMessage) (string, error) {
		var a A
		if err := json.Unmarshal(args, &a); err != nil {
			return "", fmt.Errorf("%w: %s", ErrInvalidArguments, trimJSONPrefix(err))
		}
		r, err := fn(ctx, a)
		if err != nil {
			return "", err
		}
		if s, ok := any(r).(string); ok {
			return s, nil
		}
		b, err := json.Marshal(r)
		if err != nil {
			return "", fmt.Errorf("encoding result: %w", err)
		}
		return string(b), nil
	}
}

// Name returns the name the model calls the tool by.
func (t *Tool) Name() string { return t.name }

// Description returns what the model is told the tool does.
func (t *Tool) Description() string { return t.description }

// Effect returns whether running the tool changes the world.
func (t *Tool) Effect() Effect { return t.effect }

// Timeout returns the tool's deadline. Run does not apply it: the session runs
// each call under it, stops waiting when it passes and may abandon a handler
// that ignores its context, so a handler must honour ctx.
func (t *Tool) Timeout() time.Duration { return t.timeout }

// Policy returns what happens to a call when its turn is interrupted.
func (t *Tool) Policy() Policy { return t.policy }

// Dedupe reports whether a repeated call with the same arguments reuses the
// earlier outcome instead of running again: true for a mutation unless
// turned off with [WithDedupe].
func (t *Tool) Dedupe() bool { return t.dedupe }

// Speculative reports whether a call may start before its turn is
// committed (WithSpeculative).
func (t *Tool) Speculative() bool { return t.speculative }

// Reconciler returns the tool's reconcile hook, or nil.
func (t *Tool) Reconciler() Reconciler { return t.reconcile }

// Schema returns the JSON schema of the tool's arguments.
func (t *Tool) Schema() json.RawMessage { return bytes.Clone(t.schema) }

// Spec returns the tool as described to the model.
func (t *Tool) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: t.name, Description: t.description, Parameters: t.Schema()}
}

// Run validates args (see [Tool.Validate]) and then calls the handler with
// them. Handler errors are returned wrapped; a handler panic is returned as an
// error wrapping [ErrToolPanicked]. A call whose ctx is already done is not
// started, so an abandoned mutation never begins late.
func (t *Tool) Run(ctx context.Context, args json.RawMessage) (out string, err error) {
	args, err = t.validate(args)
	if err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("tool %q not started: %w", t.name, err)
	}
	defer func() {
		if p := recover(); p != nil {
			out, err = "", panicError(t.name, p)
		}
	}()
	out, err = t.handler.Call(ctx, args)
	if err != nil {
		return "", fmt.Errorf("tool %q: %w", t.name, err)
	}
	return out, nil
}

func panicError(name string, p any) error {
	if e, ok := p.(error); ok {
		return fmt.Errorf("tool %q: %w: %w", name, ErrToolPanicked, e)
	}
	return fmt.Errorf("tool %q: %w: %v", name, ErrToolPanicked, p)
}

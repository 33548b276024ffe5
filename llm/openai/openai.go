package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/holdline/holdline/llm"
)

// Defaults.
const (
	DefaultModel   = "gpt-4o-mini"
	DefaultBaseURL = "https://api.openai.com/v1"

	DefaultRetries   = 3
	DefaultRetryBase = 200 * time.Millisecond
	DefaultRetryMax  = 2 * time.Second

	// defaultHeaderTimeout bounds the wait for response headers with the
	// default HTTP client. It is generous because the caller's context is
	// what enforces a time to first token; this only stops a request from
	// hanging forever when the caller set no deadline.
	defaultHeaderTimeout = 60 * time.Second
)

// Errors callers branch on.
var (
	// ErrNoAPIKey is returned by New when no key was given and
	// OPENAI_API_KEY is empty.
	ErrNoAPIKey = errors.New("openai: no API key (set OPENAI_API_KEY or use WithAPIKey)")
	// ErrRateLimited is wrapped by the error of a request that was still
	// answered with HTTP 429 after its retries.
	ErrRateLimited = errors.New("openai: rate limited (HTTP 429)")
	// ErrServer is wrapped by the error of a request that was still
	// answered with HTTP 5xx after its retries.
	ErrServer = errors.New("openai: server error (HTTP 5xx)")
	// ErrClosed is returned by Recv after Close.
	ErrClosed = errors.New("openai: stream closed")
)

// Model streams chat completions. It is safe for concurrent use.
type Model struct {
	client *goopenai.Client
	cfg    config
	// wait sleeps between retries; tests replace it to see the waits.
	wait func(ctx context.Context, d time.Duration) error
}

var _ llm.Model = (*Model)(nil)

type config struct {
	model       string
	apiKey      string
	baseURL     string
	httpClient  *http.Client
	retries     int
	retryBase   time.Duration
	retryMax    time.Duration
	temperature *float32
	noUsage     bool
}

// Option configures a Model.
type Option func(*config)

// WithModel sets the model name (default DefaultModel).
func WithModel(name string) Option { return func(c *config) { c.model = name } }

// WithAPIKey sets the API key (default: the OPENAI_API_KEY environment
// variable).
func WithAPIKey(key string) Option { return func(c *config) { c.apiKey = key } }

// WithBaseURL sets the API's base URL, ending in /v1 (default: the
// OPENAI_BASE_URL environment variable, else DefaultBaseURL).
func WithBaseURL(url string) Option { return func(c *config) { c.baseURL = url } }

// WithHTTPClient sets the HTTP client. It must not have an overall Timeout
// shorter than the longest answer, since that would cut streams; the
// request's context bounds each request instead, so its transport must
// honour request contexts (net/http's does). The default client has no
// overall timeout and waits at most 60 s for response headers.
func WithHTTPClient(hc *http.Client) Option { return func(c *config) { c.httpClient = hc } }

// WithRetries sets how many times a request that failed before its first
// token is retried (0 disables retries) and the backoff: the n-th retry
// waits about base·2ⁿ with jitter, at most max. A Retry-After from the
// server replaces the computed wait, still at most max.
func WithRetries(n int, base, max time.Duration) Option {
	return func(c *config) { c.retries, c.retryBase, c.retryMax = n, base, max }
}

// WithTemperature sets the sampling temperature. go-openai omits a zero
// temperature from the request, so 0 means the server's default; use a
// tiny positive value for near-greedy sampling.
func WithTemperature(t float32) Option { return func(c *config) { c.temperature = &t } }

// WithoutUsage stops asking for the answer's token counts
// (stream_options.include_usage), for compatible servers that refuse the
// option. The counts go into each turn's breakdown (events.Turn).
func WithoutUsage() Option { return func(c *config) { c.noUsage = true } }

// New returns a Model. It fails with ErrNoAPIKey when there is no key.
func New(opts ...Option) (*Model, error) {
	cfg := config{
		model:     DefaultModel,
		retries:   DefaultRetries,
		retryBase: DefaultRetryBase,
		retryMax:  DefaultRetryMax,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.apiKey == "" {
		cfg.apiKey = os.Getenv("OPENAI_API_KEY")
	}
	if cfg.apiKey == "" {
		return nil, ErrNoAPIKey
	}
	if cfg.baseURL == "" {
		cfg.baseURL = os.Getenv("OPENAI_BASE_URL")
	}
	if cfg.baseURL == "" {
		cfg.baseURL = DefaultBaseURL
	}
	cfg.baseURL = strings.TrimRight(cfg.baseURL, "/")
	if cfg.model == "" {
		return nil, errors.New("openai: empty model name")
	}
	if cfg.retries < 0 || cfg.retryBase < 0 || cfg.retryMax < cfg.retryBase {
		return nil, fmt.Errorf("openai: invalid retries (%d, base %v, max %v)", cfg.retries, cfg.retryBase, cfg.retryMax)
	}
	if cfg.httpClient == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.ResponseHeaderTimeout = defaultHeaderTimeout
		// No Client.Timeout: it would cut long streams.
		cfg.httpClient = &http.Client{Transport: t}
	}

	gc := goopenai.DefaultConfig(cfg.apiKey)
	gc.BaseURL = cfg.baseURL
	gc.HTTPClient = doer{cfg.httpClient}
	return &Model{
		client: goopenai.NewClientWithConfig(gc),
		cfg:    cfg,
		wait:   sleep,
	}, nil
}

// Name returns the model name requests are sent with.
func (m *Model) Name() string { return m.cfg.model }

// Stream starts a completion and returns at once; connecting, and retrying
// a failed start, happen in the background and show in the first Recv.
func (m *Model) Stream(ctx context.Context, req llm.Request) (llm.Stream, error) {
	creq := m.request(req)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	return m.start(ctx, creq), nil
}

// request builds the chat-completion request for req.
func (m *Model) request(req llm.Request) goopenai.ChatCompletionRequest {
	creq := goopenai.ChatCompletionRequest{
		Model:    m.cfg.model,
		Messages: messages(req),
		Tools:    tools(req.Tools),
		Stream:   true,
	}
	if !m.cfg.noUsage {
		creq.StreamOptions = &goopenai.StreamOptions{IncludeUsage: true}
	}
	if m.cfg.temperature != nil {
		creq.Temperature = *m.cfg.temperature
	}
	return creq
}

// redact keeps the API key out of err's text while errors.Is and errors.As
// still see everything err wraps.
func (m *Model) redact(err error) error {
	if err == nil || !strings.Contains(err.Error(), m.cfg.apiKey) {
		return err
	}
	return &redactedError{err: err, key: m.cfg.apiKey}
}

type redactedError struct {
	err error
	key string
}

func (e *redactedError) Error() string {
	return strings.ReplaceAll(e.err.Error(), e.key, "[redacted]")
}

func (e *redactedError) Unwrap() error { return e.err }

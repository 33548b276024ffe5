package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/stt"
)

// Defaults.
const (
	DefaultModel   = "gpt-4o-mini-transcribe"
	DefaultBaseURL = "https://api.openai.com/v1"
	// DefaultPreRoll is how much audio from before StartOfSpeech an
	// utterance starts with.
	DefaultPreRoll = 300 * time.Millisecond
	// DefaultMaxUtterance bounds an utterance: one that goes on longer is
	// sent at this length and the rest continues as a new utterance.
	DefaultMaxUtterance = 30 * time.Second
	// DefaultTimeout is how long one utterance's upload, retries included,
	// may take.
	DefaultTimeout = 15 * time.Second
	// MinUtterance is the shortest utterance sent: the API rejects shorter
	// files, and so little audio holds no word anyway.
	MinUtterance = 100 * time.Millisecond
)

// uploadRate is the highest rate uploaded: the models work at 16 kHz, so
// anything above is only bytes on the wire.
const uploadRate = media.Rate16k

// Retry policy. Utterances are short and the caller is waiting for the
// answer, so the backoff is short too; a server asking for a longer wait
// than maxRetryWait is not waited for.
const (
	maxRetries   = 2
	retryBackoff = 200 * time.Millisecond
	maxRetryWait = 2 * time.Second
)

// Environment variables read by New.
const (
	EnvAPIKey  = "OPENAI_API_KEY"
	EnvBaseURL = "OPENAI_BASE_URL"
)

var (
	// ErrNoAPIKey is returned by New when neither WithAPIKey nor
	// OPENAI_API_KEY gives a key.
	ErrNoAPIKey = errors.New("openai: no API key: set OPENAI_API_KEY or use WithAPIKey")
	// ErrClosed is returned by Write, StartOfSpeech and EndOfSpeech on a
	// closed stream. (Recv on a closed stream returns io.EOF, as the
	// stt.Stream contract asks.)
	ErrClosed = errors.New("openai: transcription stream closed")
)

// Option configures a Recognizer.
type Option func(*config)

type config struct {
	model, apiKey, baseURL string
	language, prompt       string
	client                 *http.Client
	preRoll, maxUtterance  time.Duration
	timeout                time.Duration
}

// WithModel sets the transcription model (default DefaultModel).
func WithModel(model string) Option { return func(c *config) { c.model = model } }

// WithAPIKey sets the API key (default: $OPENAI_API_KEY).
func WithAPIKey(key string) Option { return func(c *config) { c.apiKey = key } }

// WithBaseURL sets the API's base URL, ending in /v1 (default:
// $OPENAI_BASE_URL, else DefaultBaseURL).
func WithBaseURL(u string) Option { return func(c *config) { c.baseURL = u } }

// WithHTTPClient sets the HTTP client (default http.DefaultClient). Leave
// its Timeout zero: each upload has its own deadline (WithTimeout).
func WithHTTPClient(hc *http.Client) Option { return func(c *config) { c.client = hc } }

// WithLanguage sets the language of the audio in ISO-639-1 ("en"), which
// improves accuracy and latency. By default the model detects it.
func WithLanguage(lang string) Option { return func(c *config) { c.language = lang } }

// WithPrompt sets a text the model sees with every utterance: names, the
// domain's vocabulary, the expected style.
func WithPrompt(prompt string) Option { return func(c *config) { c.prompt = prompt } }

// WithPreRoll sets how much audio from before StartOfSpeech an utterance
// keeps (default DefaultPreRoll; 0 keeps none). It must be shorter than
// the maximum utterance.
func WithPreRoll(d time.Duration) Option { return func(c *config) { c.preRoll = d } }

// WithMaxUtterance sets the longest utterance sent at once (default
// DefaultMaxUtterance).
func WithMaxUtterance(d time.Duration) Option { return func(c *config) { c.maxUtterance = d } }

// WithTimeout sets how long one utterance's upload may take, retries
// included (default DefaultTimeout).
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// Recognizer is an [stt.Recognizer] backed by OpenAI's transcription
// endpoint. It is safe for concurrent use.
type Recognizer struct {
	cfg      config
	endpoint string
}

var _ stt.Recognizer = (*Recognizer)(nil)

// New returns a Recognizer configured by opts. The API key and base URL
// default to $OPENAI_API_KEY and $OPENAI_BASE_URL; without a key New
// returns ErrNoAPIKey.
func New(opts ...Option) (*Recognizer, error) {
	cfg := config{
		model:        DefaultModel,
		apiKey:       os.Getenv(EnvAPIKey),
		baseURL:      os.Getenv(EnvBaseURL),
		preRoll:      DefaultPreRoll,
		maxUtterance: DefaultMaxUtterance,
		timeout:      DefaultTimeout,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.apiKey == "" {
		return nil, ErrNoAPIKey
	}
	if cfg.baseURL == "" {
		cfg.baseURL = DefaultBaseURL
	}
	if u, err := url.Parse(cfg.baseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai: invalid base URL %q", cfg.baseURL)
	}
	if cfg.client == nil {
		cfg.client = http.DefaultClient
	}
	switch {
	case cfg.model == "":
		return nil, errors.New("openai: empty model name")
	case cfg.preRoll < 0:
		return nil, fmt.Errorf("openai: negative pre-roll %v", cfg.preRoll)
	case cfg.maxUtterance < MinUtterance:
		return nil, fmt.Errorf("openai: max utterance %v is shorter than %v", cfg.maxUtterance, MinUtterance)
	case cfg.preRoll >= cfg.maxUtterance:
		return nil, fmt.Errorf("openai: pre-roll %v is not shorter than the max utterance %v", cfg.preRoll, cfg.maxUtterance)
	case cfg.timeout <= 0:
		return nil, fmt.Errorf("openai: non-positive timeout %v", cfg.timeout)
	}
	return &Recognizer{
		cfg:      cfg,
		endpoint: strings.TrimRight(cfg.baseURL, "/") + "/audio/transcriptions",
	}, nil
}

// Stream implements [stt.Recognizer]. The stream also implements
// [stt.SpeechStarter]. Cancelling ctx cancels its uploads: Recv then
// returns an error wrapping ctx.Err(). Close it when done.
func (r *Recognizer) Stream(ctx context.Context, sampleRate int) (stt.Stream, error) {
	if err := media.CheckRate(sampleRate); err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("openai: transcription: %w", err)
	}
	return newStream(ctx, r, sampleRate), nil
}

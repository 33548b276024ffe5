package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/tts"
)

// Defaults.
const (
	DefaultModel   = "gpt-4o-mini-tts"
	DefaultVoice   = "alloy"
	DefaultBaseURL = "https://api.openai.com/v1"
	// SourceRate is the sample rate of the API's pcm format.
	SourceRate = media.Rate24k
)

// Environment variables read by New.
const (
	EnvAPIKey  = "OPENAI_API_KEY"
	EnvBaseURL = "OPENAI_BASE_URL"
)

// Chunk bounds: Recv waits for at least minChunk of audio (unless the body
// ends) and returns at most maxChunk, as bytes of the 24 kHz source.
const (
	minChunkBytes = 2 * SourceRate * 20 / 1000
	maxChunkBytes = 2 * SourceRate * 40 / 1000
)

var (
	// ErrNoAPIKey is returned by New when neither WithAPIKey nor
	// OPENAI_API_KEY gives a key.
	ErrNoAPIKey = errors.New("openai: no API key: set OPENAI_API_KEY or use WithAPIKey")
	// ErrClosed is returned by Recv on a closed stream.
	ErrClosed = errors.New("openai: speech stream closed")
)

// Option configures a Synthesizer.
type Option func(*config)

type config struct {
	model, voice, apiKey, baseURL string
	instructions                  string
	speed                         float64
	rate                          int
	client                        *http.Client
}

// WithModel sets the speech model (default DefaultModel).
func WithModel(model string) Option { return func(c *config) { c.model = model } }

// WithVoice sets the voice (default DefaultVoice).
func WithVoice(voice string) Option { return func(c *config) { c.voice = voice } }

// WithAPIKey sets the API key (default: $OPENAI_API_KEY).
func WithAPIKey(key string) Option { return func(c *config) { c.apiKey = key } }

// WithBaseURL sets the API's base URL, ending in /v1 (default:
// $OPENAI_BASE_URL, else DefaultBaseURL).
func WithBaseURL(u string) Option { return func(c *config) { c.baseURL = u } }

// WithHTTPClient sets the HTTP client (default http.DefaultClient). Leave
// its Timeout zero: it would cut long answers off mid-stream; the context
// passed to Synthesize bounds a request.
func WithHTTPClient(hc *http.Client) Option { return func(c *config) { c.client = hc } }

// WithSampleRate sets the rate of the chunks (8, 16, 24 or 48 kHz; default
// SourceRate, 24 kHz, as the API sends it). Other rates are resampled in
// the stream.
func WithSampleRate(rate int) Option { return func(c *config) { c.rate = rate } }

// WithInstructions sets how the voice speaks (tone, pace, accent), for
// models that take instructions (gpt-4o-mini-tts; not tts-1).
func WithInstructions(s string) Option { return func(c *config) { c.instructions = s } }

// WithSpeed sets the speaking speed, 0.25 to 4 (default 1).
func WithSpeed(speed float64) Option { return func(c *config) { c.speed = speed } }

// Synthesizer is a [tts.Synthesizer] backed by OpenAI's speech endpoint. It
// is safe for concurrent use.
type Synthesizer struct {
	cfg      config
	endpoint string
}

var _ tts.Synthesizer = (*Synthesizer)(nil)

// New returns a Synthesizer configured by opts. The API key and base URL
// default to $OPENAI_API_KEY and $OPENAI_BASE_URL; without a key New
// returns ErrNoAPIKey.
func New(opts ...Option) (*Synthesizer, error) {
	cfg := config{
		model:   DefaultModel,
		voice:   DefaultVoice,
		apiKey:  os.Getenv(EnvAPIKey),
		baseURL: os.Getenv(EnvBaseURL),
		rate:    SourceRate,
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
	case cfg.voice == "":
		return nil, errors.New("openai: empty voice name")
	case cfg.speed != 0 && !(cfg.speed >= 0.25 && cfg.speed <= 4):
		return nil, fmt.Errorf("openai: speed %v outside 0.25 to 4", cfg.speed)
	}
	if err := media.CheckRate(cfg.rate); err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	return &Synthesizer{
		cfg:      cfg,
		endpoint: strings.TrimRight(cfg.baseURL, "/") + "/audio/speech",
	}, nil
}

// speechRequest is the endpoint's JSON body.
type speechRequest struct {
	Model          string  `json:"model"`
	Input          string  `json:"input"`
	Voice          string  `json:"voice"`
	ResponseFormat string  `json:"response_format"`
	Instructions   string  `json:"instructions,omitempty"`
	Speed          float64 `json:"speed,omitempty"`
}

// Synthesize implements [tts.Synthesizer]. It sends the request and waits
// for the answer to start, so an error answer (after the retries) is
// returned here; the audio is read by Recv as it arrives. Text without any
// word yields no audio and sends nothing.
func (s *Synthesizer) Synthesize(ctx context.Context, text string) (tts.Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("openai: speech: %w", err)
	}
	st := &stream{syn: s, parent: ctx, text: text, rate: s.cfg.rate}
	if strings.TrimSpace(text) == "" {
		st.eof = true
		return st, nil
	}
	payload, err := json.Marshal(speechRequest{
		Model:          s.cfg.model,
		Input:          text,
		Voice:          s.cfg.voice,
		ResponseFormat: "pcm",
		Instructions:   s.cfg.instructions,
		Speed:          s.cfg.speed,
	})
	if err != nil {
		return nil, fmt.Errorf("openai: speech: %w", err)
	}
	st.payload = payload
	st.ctx, st.cancel = context.WithCancel(ctx)
	if s.cfg.rate != SourceRate {
		if st.rs, err = media.NewResampler(SourceRate, s.cfg.rate); err != nil {
			st.cancel()
			return nil, fmt.Errorf("openai: speech: %w", err)
		}
	}
	if err := st.connect(nil); err != nil {
		st.cancel()
		return nil, st.wrap(err)
	}
	return st, nil
}

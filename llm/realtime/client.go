package realtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/holdline/holdline/llm"
)

// Defaults.
const (
	DefaultModel              = "gpt-realtime"
	DefaultVoice              = "alloy"
	DefaultTranscriptionModel = "gpt-4o-mini-transcribe"
	DefaultBaseURL            = "https://api.openai.com/v1"
	// Rate is the sample rate of the API's PCM audio, both ways.
	Rate = 24000
	// DefaultDialTimeout bounds the websocket handshake.
	DefaultDialTimeout = 10 * time.Second
	// DefaultResponseWait bounds how long a new response waits for the
	// previous one to end after it was cancelled.
	DefaultResponseWait = 10 * time.Second
	// writeTimeout bounds one websocket write; a connection that cannot
	// take an event in that time is broken.
	writeTimeout = 10 * time.Second
	// maxAudioBacklog is how much caller audio may wait to be sent before
	// Write reports the connection is not keeping up.
	maxAudioBacklog = 5 * time.Second
)

// Errors callers branch on.
var (
	// ErrNoAPIKey: no key was given and OPENAI_API_KEY is unset.
	ErrNoAPIKey = errors.New("realtime: no API key (set OPENAI_API_KEY or use WithAPIKey)")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("realtime: client closed")
	// ErrConnectionLost: the websocket ended under a response or stream.
	ErrConnectionLost = errors.New("realtime: connection lost")
	// ErrResponseStuck: the previous response did not end in time, so a
	// new one cannot start (two responses are never in flight).
	ErrResponseStuck = errors.New("realtime: previous response did not end")
	// ErrServerCreatesResponses: server VAD was asked to start responses
	// itself, which would bypass the session's turn-taking and tool ledger.
	ErrServerCreatesResponses = errors.New("realtime: server VAD create_response is not supported: the session decides when the agent answers")
)

// APIError is an error event from the server.
type APIError struct {
	Type, Code, Message string
	// Event is the type of the client event it answers, when known.
	Event string
}

func (e *APIError) Error() string {
	s := "realtime: server error"
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Event != "" {
		s += " (to " + e.Event + ")"
	}
	return s + ": " + e.Message
}

type config struct {
	model, apiKey, baseURL, voice string
	transcription, language       string
	textOutput                    bool
	serverVAD, interruptResponse  bool
	httpClient                    *http.Client
	dialTimeout, responseWait     time.Duration
	log                           *slog.Logger
}

// Option configures a Client.
type Option func(*config)

// WithModel sets the Realtime model (default DefaultModel).
func WithModel(name string) Option { return func(c *config) { c.model = name } }

// WithAPIKey sets the API key (default: $OPENAI_API_KEY).
func WithAPIKey(key string) Option { return func(c *config) { c.apiKey = key } }

// WithBaseURL sets the API base URL, as for the HTTP APIs (default:
// $OPENAI_BASE_URL, else DefaultBaseURL); the websocket is at
// BASE/realtime.
func WithBaseURL(u string) Option { return func(c *config) { c.baseURL = u } }

// WithVoice sets the model's voice (default DefaultVoice).
func WithVoice(v string) Option { return func(c *config) { c.voice = v } }

// WithTranscription sets the model transcribing the caller (default
// DefaultTranscriptionModel) and optionally the language ("" lets it
// guess).
func WithTranscription(model, language string) Option {
	return func(c *config) { c.transcription, c.language = model, language }
}

// WithTextOutput makes the model answer in text, for the session to
// synthesise, instead of speaking itself.
func WithTextOutput() Option { return func(c *config) { c.textOutput = true } }

// WithServerVAD lets the server's voice detector segment the caller's
// audio instead of the session's; interruptResponse lets the server cut
// its own response short when it hears the caller. The session's barge-in
// arbiter still decides what is an interruption.
func WithServerVAD(interruptResponse bool) Option {
	return func(c *config) { c.serverVAD, c.interruptResponse = true, interruptResponse }
}

// WithHTTPClient sets the client used for the websocket handshake.
func WithHTTPClient(h *http.Client) Option { return func(c *config) { c.httpClient = h } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithTimeouts sets the handshake bound and how long a response waits for
// the previous one to end.
func WithTimeouts(dial, responseWait time.Duration) Option {
	return func(c *config) { c.dialTimeout, c.responseWait = dial, responseWait }
}

// Client is one Realtime session: the Model of one call's agent, and with
// Recognizer its STT. Its methods are safe for concurrent use.
type Client struct {
	cfg config
	url string

	mu      sync.Mutex
	conn    *conn
	closed  bool
	mirror  mirror
	session string    // the session configuration last sent
	resp    *response // the response in flight, if any
	idle    chan struct{}
	rec     *recStream
	seq     int
	sent    map[string]string // event id → event type, for error reports
}

var (
	_ llm.Model  = (*Client)(nil)
	_ llm.Voiced = (*Client)(nil)
)

// New returns a client; it connects on first use.
func New(opts ...Option) (*Client, error) {
	cfg := config{
		model: DefaultModel, voice: DefaultVoice, transcription: DefaultTranscriptionModel,
		apiKey: os.Getenv("OPENAI_API_KEY"), baseURL: os.Getenv("OPENAI_BASE_URL"),
		dialTimeout: DefaultDialTimeout, responseWait: DefaultResponseWait,
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
	if cfg.log == nil {
		cfg.log = slog.Default()
	}
	if cfg.dialTimeout <= 0 || cfg.responseWait <= 0 {
		return nil, errors.New("realtime: timeouts must be positive")
	}
	u, err := url.Parse(strings.TrimSuffix(cfg.baseURL, "/") + "/realtime")
	if err != nil {
		return nil, fmt.Errorf("realtime: base URL: %w", err)
	}
	switch u.Scheme {
	case "https":
		u.Scheme = "wss"
	case "http":
		u.Scheme = "ws"
	}
	q := u.Query()
	q.Set("model", cfg.model)
	u.RawQuery = q.Encode()
	idle := make(chan struct{})
	close(idle)
	return &Client{cfg: cfg, url: u.String(), idle: idle, sent: map[string]string{}}, nil
}

// Voiced reports whether the model speaks for itself (the default) rather
// than answering in text.
func (c *Client) Voiced() bool { return !c.cfg.textOutput }

// Close ends the Realtime session and waits for its goroutines.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	cn := c.conn
	c.mu.Unlock()
	if cn != nil {
		cn.close(ErrClosed)
		cn.wait()
	}
	return nil
}

// connect returns the live connection, dialling it if needed. A new
// connection starts a new server conversation: the mirror is emptied and
// the next sync sends the whole context again.
func (c *Client) connect(ctx context.Context) (*conn, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	if c.conn != nil && !c.conn.isDone() {
		cn := c.conn
		c.mu.Unlock()
		return cn, nil
	}
	c.mu.Unlock()

	dctx, cancel := context.WithTimeout(ctx, c.cfg.dialTimeout)
	defer cancel()
	h := http.Header{}
	h.Set("Authorization", "Bearer "+c.cfg.apiKey)
	ws, resp, err := websocket.Dial(dctx, c.url, &websocket.DialOptions{HTTPClient: c.cfg.httpClient, HTTPHeader: h})
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("realtime: connect: HTTP %d: %w", resp.StatusCode, redact(err, c.cfg.apiKey))
		}
		return nil, fmt.Errorf("realtime: connect: %w", redact(err, c.cfg.apiKey))
	}
	ws.SetReadLimit(32 << 20)

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		ws.CloseNow()
		return nil, ErrClosed
	}
	if c.conn != nil && !c.conn.isDone() {
		ws.CloseNow() // another caller connected meanwhile
		return c.conn, nil
	}
	c.conn = newConn(ws, c.handle, c.lost)
	c.mirror = mirror{}
	c.session = ""
	// The audio formats, transcription and turn detection hold from the
	// start; the agent's instructions and tools follow with the first
	// response.
	c.conn.send(c.sessionUpdate(llm.Request{}, false))
	return c.conn, nil
}

// redact keeps the API key out of errors whatever a library put in them.
func redact(err error, key string) error {
	if key == "" || !strings.Contains(err.Error(), key) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), key, "[redacted]"))
}

// event makes a client event with a fresh id, remembering its type so an
// error event can say what it answers. Called with c.mu held.
func (c *Client) event(e clientEvent) clientEvent {
	c.seq++
	e.EventID = fmt.Sprintf("evt_hl_%d", c.seq)
	if len(c.sent) > 4096 {
		clear(c.sent)
	}
	c.sent[e.EventID] = e.Type
	return e
}

func (c *Client) newID(prefix string) string {
	c.seq++
	return fmt.Sprintf("%s_hl_%d", prefix, c.seq)
}

// sessionUpdate is the session.update for req's instructions and tools,
// or nothing (Type "") if the server has them already. Called with c.mu
// held.
func (c *Client) sessionUpdate(req llm.Request, withAgent bool) clientEvent {
	s := &wireSession{Type: "realtime", Model: c.cfg.model, ToolChoice: "auto", Tools: []wireTool{}}
	if withAgent {
		s.Instructions = req.Instructions
		for _, t := range req.Tools {
			params := t.Parameters
			if len(params) == 0 {
				params = json.RawMessage(`{"type":"object","properties":{}}`)
			}
			s.Tools = append(s.Tools, wireTool{Type: "function", Name: t.Name, Description: t.Description, Parameters: params})
		}
	}
	s.OutputModalities = []string{"audio"}
	if c.cfg.textOutput {
		s.OutputModalities = []string{"text"}
	}
	s.Audio = &wireAudio{
		Input: wireAudioInput{
			Format:        wireFormat{Type: "audio/pcm", Rate: Rate},
			Transcription: &wireTranscription{Model: c.cfg.transcription, Language: c.cfg.language},
		},
		Output: wireAudioOutput{Format: wireFormat{Type: "audio/pcm", Rate: Rate}, Voice: c.cfg.voice},
	}
	if c.cfg.serverVAD {
		s.Audio.Input.TurnDetection = &wireTurnDetection{Type: "server_vad", InterruptResponse: c.cfg.interruptResponse}
	}
	b, _ := json.Marshal(s)
	if withAgent {
		if string(b) == c.session {
			return clientEvent{}
		}
		c.session = string(b)
	}
	return c.event(clientEvent{Type: "session.update", Session: s})
}

// lost is called by the connection when it ends: a response or recogniser
// stream waiting on it fails.
func (c *Client) lost(cn *conn, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != cn {
		return
	}
	if c.resp != nil {
		c.resp.finish(fmt.Errorf("%w: %w", ErrConnectionLost, err))
		c.endResponse()
	}
	if c.rec != nil {
		c.rec.fail(fmt.Errorf("%w: %w", ErrConnectionLost, err))
	}
}

// endResponse marks that no response is in flight. Called with c.mu held.
func (c *Client) endResponse() {
	c.resp = nil
	select {
	case <-c.idle:
	default:
		close(c.idle)
	}
}

package openaitest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/holdline/holdline/llm"
)

// APIKey is the key the server accepts unless WithAPIKey says otherwise.
const APIKey = "sk-openaitest"

// Server is an OpenAI-compatible server on a loopback port.
type Server struct {
	brain    llm.Model
	apiKey   string
	chatOnly bool
	http     *httptest.Server

	mu       sync.Mutex
	latency  Latency
	requests []Request

	chat     chatState
	audio    audioState
	realtime realtimeState
}

// Request records one HTTP request the server received.
type Request struct {
	Method, Path string // e.g. "POST" and "/v1/chat/completions"
	Body         []byte // the body as read (a multipart upload's whole body)
}

// Option configures a Server.
type Option func(*Server)

// WithAPIKey sets the bearer token the server requires ("" accepts any).
func WithAPIKey(key string) Option { return func(s *Server) { s.apiKey = key } }

// WithChatOnly serves chat completions only, as many OpenAI-compatible
// servers do (vLLM, Ollama, llama.cpp's server): the audio and Realtime
// endpoints answer 404 as any unknown path does, and are recorded in
// Requests.
func WithChatOnly() Option { return func(s *Server) { s.chatOnly = true } }

// New starts a server on a loopback port whose answers come from brain (nil
// when only the transcription and speech endpoints are used). Close it
// when done.
func New(brain llm.Model, opts ...Option) *Server {
	s := &Server{brain: brain, apiKey: APIKey}
	for _, o := range opts {
		o(s)
	}
	mux := http.NewServeMux()
	s.routeChat(mux)
	if s.chatOnly {
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			s.record(Request{Method: r.Method, Path: r.URL.Path})
			http.NotFound(w, r)
		})
	} else {
		s.routeAudio(mux)
		s.routeRealtime(mux)
	}
	s.http = httptest.NewServer(s.authorize(mux))
	return s
}

// URL is the base URL clients use, ending in /v1 as OPENAI_BASE_URL does.
func (s *Server) URL() string { return s.http.URL + "/v1" }

// Close shuts the server down, ending open streams and websockets.
func (s *Server) Close() {
	s.http.CloseClientConnections()
	s.http.Close()
}

// Requests returns the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) record(r Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r)
	s.mu.Unlock()
}

// authorize answers 401 with OpenAI's error body when the bearer token is
// wrong, as the real API does.
func (s *Server) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.apiKey != "" && strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") != s.apiKey {
			WriteError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "Incorrect API key provided.")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// WriteError writes an error response in OpenAI's format.
func WriteError(w http.ResponseWriter, status int, typ, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(`{"error":{"message":` + quote(message) + `,"type":` + quote(typ) + `,"param":null,"code":` + quote(code) + `}}`))
}

func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		default:
			if r < 0x20 {
				continue
			}
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

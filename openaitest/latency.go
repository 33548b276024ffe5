package openaitest

import (
	"strings"
	"time"
	"unicode"
)

// ChatArgsTokenBytes is the size of the pieces a paced answer's tool-call
// arguments are streamed in (Latency.ChatTokenInterval), each one token:
// about what a token of JSON holds.
const ChatArgsTokenBytes = 4

// Latency is how long the server takes over every request, as a provider
// does on an ordinary day, so that a test or a benchmark can tell what the
// code under test adds to it ("holdline bench latency" measures a voice
// agent this way). Unlike a fault it is not queued: it holds for every
// request until changed ([WithLatency], [Server.SetLatency]). The zero value
// answers as fast as the server can.
//
// Every duration counts from the moment the request arrived, so the
// server's own work (reading the upload, asking the brain) is inside it,
// not on top of it. A queued fault's delays (ChatFault.HeaderDelay and
// FirstTokenDelay, AudioFault.Delay) come on top. The Realtime API is not
// paced.
type Latency struct {
	// ChatFirstToken is when a streamed chat completion sends its first
	// token (the headers go at once, as OpenAI's do). A completion asked
	// for without streaming is answered whole when its last token would
	// have been sent.
	ChatFirstToken time.Duration
	// ChatTokenInterval is the time between two tokens of a chat
	// completion. With it set, the brain's text is cut again into tokens
	// ([ChatTokens]: each word with the whitespace before it, as OpenAI's
	// tokenisers cut English) and tool-call arguments into pieces of
	// ChatArgsTokenBytes; the delta naming a tool call is a token too.
	// Token i (from 0) leaves ChatFirstToken + i×ChatTokenInterval after
	// the request arrived, or as soon as the brain has given it if the
	// brain is slower: the server never hurries a brain that paces itself
	// (a scripted.LLM does, unless made with its Unpaced method).
	ChatTokenInterval time.Duration
	// SpeechFirstAudio is when /v1/audio/speech sends its headers and the
	// first piece of audio; the rest follows at the pace SetSpeechPace set
	// (as fast as the connection takes it by default).
	SpeechFirstAudio time.Duration
	// Transcription is when /v1/audio/transcriptions answers.
	Transcription time.Duration
}

// WithLatency sets the latency of every request from the start (see
// [Latency]).
func WithLatency(l Latency) Option { return func(s *Server) { s.latency = l } }

// SetLatency sets the latency of the requests that arrive from now on.
func (s *Server) SetLatency(l Latency) {
	s.mu.Lock()
	s.latency = l
	s.mu.Unlock()
}

// currentLatency is the latency a request arriving now gets.
func (s *Server) currentLatency() Latency {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latency
}

// ChatTokens cuts text into the tokens a paced answer sends one at a time
// (Latency.ChatTokenInterval): each word with the whitespace before it, the
// first word with whatever whitespace leads the text, and trailing
// whitespace as a token of its own. They concatenate back to text.
func ChatTokens(text string) []string {
	var out []string
	start := 0
	prevSpace := true // no cut before the first word
	for i, r := range text {
		space := unicode.IsSpace(r)
		if space && !prevSpace && strings.TrimSpace(text[start:i]) != "" {
			out = append(out, text[start:i])
			start = i
		}
		prevSpace = space
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}

// tokenizer re-cuts streamed text into ChatTokens: a token is handed out
// once the whitespace that starts the next one has arrived, since until
// then its word may go on.
type tokenizer struct{ pending string }

// push adds text and returns the tokens it completed.
func (t *tokenizer) push(text string) []string {
	toks := ChatTokens(t.pending + text)
	if len(toks) == 0 {
		return nil
	}
	t.pending = toks[len(toks)-1]
	return toks[:len(toks)-1]
}

// flush returns what is left, as the last token, if anything.
func (t *tokenizer) flush() []string {
	if t.pending == "" {
		return nil
	}
	last := t.pending
	t.pending = ""
	return []string{last}
}

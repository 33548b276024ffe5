package realtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/stt"
)

// preRoll is how much audio from before the detector heard the caller
// start is sent with the utterance: detectors decide a little late.
const preRoll = 300 * time.Millisecond

// minUtterance is the least audio worth committing: the server refuses
// to commit less than 100 ms.
const minUtterance = 100 * time.Millisecond

// maxUnguided bounds the audio kept for a session whose detector never
// calls StartOfSpeech.
const maxUnguided = 15 * time.Second

// Recognizer returns the session's recogniser: the caller's utterances are
// sent to the Realtime session and its transcripts of them come back. The
// session calls StartOfSpeech and EndOfSpeech as its detector decides, so
// only speech is sent, and each utterance is committed as one user item.
func (c *Client) Recognizer() stt.Recognizer { return recognizer{c} }

type recognizer struct{ c *Client }

// ErrStreamOpen: a Realtime session has one caller, so one recogniser
// stream at a time.
var ErrStreamOpen = errors.New("realtime: a recogniser stream is already open")

func (r recognizer) Stream(ctx context.Context, sampleRate int) (stt.Stream, error) {
	c := r.c
	if _, err := c.connect(ctx); err != nil {
		return nil, err
	}
	s := &recStream{c: c, wake: make(chan struct{}, 1), ctx: ctx}
	if sampleRate != Rate {
		rs, err := media.NewResampler(sampleRate, Rate)
		if err != nil {
			return nil, fmt.Errorf("realtime: recogniser: %w", err)
		}
		s.rs = rs
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rec != nil {
		return nil, ErrStreamOpen
	}
	c.rec = s
	return s, nil
}

type recStream struct {
	c   *Client
	ctx context.Context
	rs  *media.Resampler

	// Used only by the writer goroutine (Write, StartOfSpeech, EndOfSpeech).
	buf      []int16
	ring     []int16 // the last preRoll of audio, outside utterances
	speaking bool
	guided   bool // StartOfSpeech has been called at least once
	sent     int  // samples sent in the current utterance

	mu       sync.Mutex
	out      []stt.Transcript
	partials map[string]string
	end      error
	wake     chan struct{}
}

func (s *recStream) conn() (*conn, error) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.mu.Lock()
	end := s.end
	s.mu.Unlock()
	if end != nil {
		return nil, fmt.Errorf("realtime: recogniser stream ended: %w", end)
	}
	if s.c.conn == nil || s.c.conn.isDone() {
		return nil, ErrConnectionLost
	}
	return s.c.conn, nil
}

// Write sends audio that belongs to an utterance and keeps the rest as
// pre-roll. It never waits on the network.
func (s *recStream) Write(f media.Frame) error {
	samples := f.Samples
	if s.rs != nil {
		s.buf = s.rs.Process(s.buf[:0], samples)
		samples = s.buf
	}
	if s.c.cfg.serverVAD || s.speaking {
		return s.send(samples)
	}
	// Until the session first says where speech starts, keep a whole
	// utterance's worth, in case it never does.
	keep := int(preRoll.Seconds() * Rate)
	if !s.guided {
		keep = int(maxUnguided.Seconds() * Rate)
	}
	s.ring = append(s.ring, samples...)
	if over := len(s.ring) - keep; over > 0 {
		s.ring = append(s.ring[:0], s.ring[over:]...)
	}
	return nil
}

func (s *recStream) send(samples []int16) error {
	if len(samples) == 0 {
		return nil
	}
	cn, err := s.conn()
	if err != nil {
		return err
	}
	if err := cn.sendAudio(clientEvent{Type: "input_audio_buffer.append", Audio: encodePCM(samples)}); err != nil {
		return err
	}
	s.sent += len(samples)
	return nil
}

// StartOfSpeech opens an utterance, pre-roll first.
func (s *recStream) StartOfSpeech() error {
	if s.speaking {
		return nil
	}
	ring := s.ring
	if keep := int(preRoll.Seconds() * Rate); len(ring) > keep {
		ring = ring[len(ring)-keep:]
	}
	s.guided, s.speaking = true, true
	err := s.send(ring)
	s.ring = s.ring[:0]
	return err
}

// EndOfSpeech commits the utterance as a user item, which the server
// transcribes; a scrap too short to commit is cleared.
func (s *recStream) EndOfSpeech() error {
	if s.c.cfg.serverVAD {
		return nil // the server's detector commits
	}
	if !s.guided && !s.speaking {
		// A session that never says where speech starts: the utterance is
		// what came since the last one.
		if err := s.send(s.ring); err != nil {
			return err
		}
		s.ring = s.ring[:0]
	}
	s.speaking = false
	sent := s.sent
	s.sent = 0
	if sent == 0 {
		return nil
	}
	cn, err := s.conn()
	if err != nil {
		return err
	}
	typ := "input_audio_buffer.commit"
	if sent < int(minUtterance.Seconds()*Rate) {
		typ = "input_audio_buffer.clear"
	}
	s.c.mu.Lock()
	e := s.c.event(clientEvent{Type: typ})
	s.c.mu.Unlock()
	cn.send(e)
	return nil
}

// partial and final are called by the client's reader with c.mu held.
func (s *recStream) partial(item, delta string) {
	s.mu.Lock()
	if s.partials == nil {
		s.partials = map[string]string{}
	}
	s.partials[item] += delta
	if s.end == nil {
		s.out = append(s.out, stt.Transcript{Text: strings.TrimSpace(s.partials[item])})
	}
	s.mu.Unlock()
	s.signal()
}

func (s *recStream) final(item, text string) {
	s.mu.Lock()
	delete(s.partials, item)
	if text = strings.TrimSpace(text); text != "" && s.end == nil {
		s.out = append(s.out, stt.Transcript{Text: text, Final: true})
	}
	s.mu.Unlock()
	s.signal()
}

func (s *recStream) fail(err error) {
	s.mu.Lock()
	if s.end == nil {
		s.end = err
	}
	s.mu.Unlock()
	s.signal()
}

func (s *recStream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Recv returns the next transcript; io.EOF after Close.
func (s *recStream) Recv() (stt.Transcript, error) {
	for {
		s.mu.Lock()
		if len(s.out) > 0 {
			t := s.out[0]
			s.out = s.out[1:]
			s.mu.Unlock()
			return t, nil
		}
		end := s.end
		s.mu.Unlock()
		if end != nil {
			return stt.Transcript{}, end
		}
		select {
		case <-s.wake:
		case <-s.ctx.Done():
			return stt.Transcript{}, s.ctx.Err()
		}
	}
}

// Close ends the stream; transcripts still to come are dropped.
func (s *recStream) Close() error {
	s.c.mu.Lock()
	if s.c.rec == s {
		s.c.rec = nil
	}
	s.c.mu.Unlock()
	s.fail(io.EOF)
	return nil
}

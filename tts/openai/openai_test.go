package openai_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/openaitest"
	"github.com/holdline/holdline/tts"
	"github.com/holdline/holdline/tts/openai"
)

// failAfter bounds every wait in these tests: reaching it is a failure, not
// a way to synchronise.
const failAfter = 10 * time.Second

const text = "Hello there, how can I help you today?"

// fixture is a fake server and a client with a transport of its own, so
// that a test can shape the reads, see them happen and count goroutines.
type fixture struct {
	srv *openaitest.Server
	tr  *http.Transport
	// readSizes, if set, caps successive reads of answer bodies.
	readSizes []int
	// beforeRead, if set, is called as each body Read starts, with the
	// number of bytes the body has given so far.
	beforeRead func(total int)
	// sent counts the requests sent, including those the server refuses
	// before recording them (a wrong key).
	sent atomic.Int32
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	srv := openaitest.New(nil)
	t.Cleanup(srv.Close)
	f := &fixture{srv: srv, tr: &http.Transport{}}
	t.Cleanup(f.tr.CloseIdleConnections)
	return f
}

func (f *fixture) RoundTrip(req *http.Request) (*http.Response, error) {
	f.sent.Add(1)
	resp, err := f.tr.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &shapedBody{ReadCloser: resp.Body, f: f}
	return resp, nil
}

type shapedBody struct {
	io.ReadCloser
	f        *fixture
	i, total int
}

func (b *shapedBody) Read(p []byte) (int, error) {
	if b.f.beforeRead != nil {
		b.f.beforeRead(b.total)
	}
	if sizes := b.f.readSizes; len(sizes) > 0 {
		p = p[:min(len(p), sizes[b.i%len(sizes)])]
		b.i++
	}
	n, err := b.ReadCloser.Read(p)
	b.total += n
	return n, err
}

// waitingAt returns a channel that gets a value when a body Read starts
// after exactly n bytes: with the server holding the body there, the
// client is then blocked reading.
func (f *fixture) waitingAt(n int) <-chan struct{} {
	ch := make(chan struct{}, 1)
	f.beforeRead = func(total int) {
		if total == n {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	return ch
}

// recvLoop calls Recv on a goroutine until it fails, passing on what it
// gets.
func recvLoop(st tts.Stream) <-chan recvResult {
	ch := make(chan recvResult, 100)
	go func() {
		for {
			c, err := st.Recv()
			c.Audio.Samples = slices.Clone(c.Audio.Samples)
			ch <- recvResult{c, err}
			if err != nil {
				return
			}
		}
	}()
	return ch
}

// recvErr waits for the error that ends results.
func recvErr(t *testing.T, results <-chan recvResult) error {
	t.Helper()
	timeout := time.After(failAfter)
	for {
		select {
		case r := <-results:
			if r.err != nil {
				return r.err
			}
		case <-timeout:
			t.Fatal("Recv did not fail")
		}
	}
}

// hold returns a channel for AudioFault.Hold, released when the test ends
// at the latest (before the server closes: its handler waits on it).
func hold(t *testing.T) (ch chan struct{}, release func()) {
	ch = make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	t.Cleanup(release)
	return ch, release
}

func (f *fixture) synth(t *testing.T, opts ...openai.Option) *openai.Synthesizer {
	t.Helper()
	base := []openai.Option{
		openai.WithBaseURL(f.srv.URL()),
		openai.WithAPIKey(openaitest.APIKey),
		openai.WithHTTPClient(&http.Client{Transport: f}),
	}
	s, err := openai.New(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (f *fixture) speak(t *testing.T, ctx context.Context, text string, opts ...openai.Option) tts.Stream {
	t.Helper()
	st, err := f.synth(t, opts...).Synthesize(ctx, text)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

type recvResult struct {
	c   tts.Chunk
	err error
}

// recvAsync calls Recv on a goroutine, copying the samples, which the
// stream may reuse.
func recvAsync(st tts.Stream) <-chan recvResult {
	ch := make(chan recvResult, 1)
	go func() {
		c, err := st.Recv()
		c.Audio.Samples = slices.Clone(c.Audio.Samples)
		ch <- recvResult{c, err}
	}()
	return ch
}

func recv(t *testing.T, st tts.Stream) (tts.Chunk, error) {
	t.Helper()
	select {
	case r := <-recvAsync(st):
		return r.c, r.err
	case <-time.After(failAfter):
		t.Fatal("Recv did not return")
		return tts.Chunk{}, nil
	}
}

// result is everything a stream delivered.
type result struct {
	samples []int16
	chunks  []tts.Chunk // audio chunks
	words   []tts.WordTiming
	err     error // io.EOF when it ended well
}

// readAll reads st to its end, checking the chunk contract on the way.
func readAll(t *testing.T, st tts.Stream, rate int) result {
	t.Helper()
	var r result
	for {
		c, err := recv(t, st)
		if err != nil {
			r.err = err
			return r
		}
		if len(c.Audio.Samples) > 0 {
			if len(r.words) > 0 {
				t.Fatal("audio after the word timings")
			}
			if c.Audio.SampleRate != rate {
				t.Fatalf("chunk at %d Hz, want %d", c.Audio.SampleRate, rate)
			}
			r.samples = append(r.samples, c.Audio.Samples...)
			r.chunks = append(r.chunks, c)
		}
		if len(c.Words) > 0 {
			if len(c.Audio.Samples) > 0 {
				t.Error("word timings came with audio, want them after it")
			}
			r.words = append(r.words, c.Words...)
		}
		if len(c.Audio.Samples) == 0 && len(c.Words) == 0 {
			t.Fatal("empty chunk")
		}
	}
}

// checkChunkSizes: 20 to 40 ms each, the last one excepted (it is what
// is left).
func checkChunkSizes(t *testing.T, chunks []tts.Chunk) {
	t.Helper()
	for i, c := range chunks {
		d := c.Audio.Duration()
		// One sample of slack for resampled chunks.
		slack := time.Second / time.Duration(c.Audio.SampleRate)
		if d > 40*time.Millisecond+slack || (i < len(chunks)-1 && d < 20*time.Millisecond-slack) {
			t.Errorf("chunk %d of %d lasts %v, want 20 to 40 ms", i, len(chunks), d)
		}
	}
}

func wantAudio(t *testing.T, r result, want []int16) {
	t.Helper()
	if r.err != io.EOF {
		t.Fatalf("stream ended with %v, want io.EOF", r.err)
	}
	if len(r.samples) != len(want) {
		t.Fatalf("%d samples, want %d", len(r.samples), len(want))
	}
	for i := range want {
		if r.samples[i] != want[i] {
			t.Fatalf("sample %d = %d, want %d", i, r.samples[i], want[i])
		}
	}
}

// TestStreaming: the first chunk comes while the server is still holding
// the rest of the body back, and the audio is the server's, sample for
// sample.
func TestStreaming(t *testing.T) {
	f := newFixture(t)
	ch, release := hold(t)
	f.srv.SetSpeechPace(openaitest.SpeechPace{PieceBytes: 333})
	f.srv.QueueSpeechFault(openaitest.AudioFault{Hold: ch, HoldAfter: 4801})
	st := f.speak(t, t.Context(), text)

	// 4801 bytes are out: 2400 samples and half of the next one, of
	// which all but less than a minimum chunk (20 ms, 960 bytes) must
	// come out before the server sends more.
	var early []int16
	for len(early) < (4801-959)/2 {
		c, err := recv(t, st)
		if err != nil {
			t.Fatalf("Recv before the body ended: %v", err)
		}
		early = append(early, c.Audio.Samples...)
	}
	if len(early) > 2400 {
		t.Fatalf("%d samples before the hold, only 2400 were sent", len(early))
	}
	release()
	r := readAll(t, st, openai.SourceRate)
	r.samples = append(early, r.samples...)
	wantAudio(t, r, openaitest.SpeechAudio(text, 1))
	checkChunkSizes(t, r.chunks)
	if len(r.words) != len(strings.Fields(text)) {
		t.Errorf("%d word timings, want %d", len(r.words), len(strings.Fields(text)))
	}
}

// TestOddReads: samples split across reads in every way come out whole.
func TestOddReads(t *testing.T) {
	for _, sizes := range [][]int{{1}, {3}, {1, 2, 3, 5, 7, 333, 1001}, {1919, 1}} {
		t.Run(fmt.Sprint(sizes), func(t *testing.T) {
			f := newFixture(t)
			f.readSizes = sizes
			f.srv.SetSpeechPace(openaitest.SpeechPace{PieceBytes: 777})
			st := f.speak(t, t.Context(), text)
			r := readAll(t, st, openai.SourceRate)
			wantAudio(t, r, openaitest.SpeechAudio(text, 1))
			checkChunkSizes(t, r.chunks)
		})
	}
}

// TestResample: at 16 kHz the audio lasts what it lasts at 24 kHz.
func TestResample(t *testing.T) {
	f := newFixture(t)
	st := f.speak(t, t.Context(), text, openai.WithSampleRate(media.Rate16k))
	r := readAll(t, st, media.Rate16k)
	if r.err != io.EOF {
		t.Fatal(r.err)
	}
	src := len(openaitest.SpeechAudio(text, 1))
	if want := (src*2 + 2) / 3; len(r.samples) != want {
		t.Errorf("%d samples at 16 kHz, want %d (from %d at 24 kHz)", len(r.samples), want, src)
	}
	got := media.Frame{Samples: r.samples, SampleRate: media.Rate16k}.Duration()
	want := media.Frame{Samples: make([]int16, src), SampleRate: openai.SourceRate}.Duration()
	if d := got - want; d < 0 || d > time.Second/media.Rate16k {
		t.Errorf("%v of audio, want %v", got, want)
	}
	if end := r.words[len(r.words)-1].End; end != got {
		t.Errorf("the last word ends at %v, the audio at %v", end, got)
	}
	checkChunkSizes(t, r.chunks)
	// The tone survives: its level is the server's (-20 dBFS, 3277 peak).
	peak := int16(0)
	for _, v := range r.samples[1000:] {
		peak = max(peak, v)
	}
	if peak < 3100 || peak > 3400 {
		t.Errorf("peak %d after resampling, want about 3277", peak)
	}
}

// TestWordTimings: the words tile the audio, in proportion to their
// length.
func TestWordTimings(t *testing.T) {
	f := newFixture(t)
	const text = "I understand everything now"
	st := f.speak(t, t.Context(), text)
	r := readAll(t, st, openai.SourceRate)
	if r.err != io.EOF {
		t.Fatal(r.err)
	}
	dur := media.Frame{Samples: r.samples, SampleRate: openai.SourceRate}.Duration()
	words := strings.Fields(text)
	if len(r.words) != len(words) {
		t.Fatalf("words %v, want %d", r.words, len(words))
	}
	at := time.Duration(0)
	for i, w := range r.words {
		if w.Word != words[i] || w.Start != at || w.End < w.Start {
			t.Errorf("word %d = %+v, want %q from %v", i, w, words[i], at)
		}
		at = w.End
	}
	if at != dur {
		t.Errorf("the words end at %v, the audio at %v", at, dur)
	}
	// "I" weighs 2, "everything" 11.
	short := r.words[0].End - r.words[0].Start
	long := r.words[2].End - r.words[2].Start
	if ratio := float64(long) / float64(short); ratio < 5.49 || ratio > 5.51 {
		t.Errorf("everything/I = %.3f, want 5.5", ratio)
	}
}

// TestCancel: cancelling the context while Recv waits for the body ends
// it at once.
func TestCancel(t *testing.T) {
	f := newFixture(t)
	ch, _ := hold(t)
	const sent = 3840
	f.srv.QueueSpeechFault(openaitest.AudioFault{Hold: ch, HoldAfter: sent})
	waiting := f.waitingAt(sent)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	st := f.speak(t, ctx, text)
	results := recvLoop(st)
	select {
	case <-waiting:
	case <-time.After(failAfter):
		t.Fatal("the client never read up to the hold")
	}
	start := time.Now()
	cancel()
	if err := recvErr(t, results); !errors.Is(err, context.Canceled) {
		t.Fatalf("Recv = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Recv took %v to notice the cancellation", d)
	}
	if _, err := st.Recv(); !errors.Is(err, context.Canceled) {
		t.Errorf("second Recv = %v, want context.Canceled", err)
	}
}

// TestClose: Close from another goroutine ends a blocked Recv, and no
// goroutine is left.
func TestClose(t *testing.T) {
	f := newFixture(t)
	before := runtime.NumGoroutine()
	ch, _ := hold(t)
	f.srv.QueueSpeechFault(openaitest.AudioFault{Hold: ch, HoldAfter: 1})
	waiting := f.waitingAt(1)
	st, err := f.synth(t).Synthesize(t.Context(), text)
	if err != nil {
		t.Fatal(err)
	}
	results := recvLoop(st)
	select {
	case <-waiting:
	case <-time.After(failAfter):
		t.Fatal("the client never read up to the hold")
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := recvErr(t, results); !errors.Is(err, openai.ErrClosed) {
		t.Fatalf("Recv = %v, want ErrClosed", err)
	}
	if _, err := st.Recv(); !errors.Is(err, openai.ErrClosed) {
		t.Errorf("Recv after Close = %v, want ErrClosed", err)
	}
	if err := st.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}

	f.tr.CloseIdleConnections()
	deadline := time.Now().Add(failAfter)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond) // polling for exits, which nothing signals
	}
}

func TestRetry(t *testing.T) {
	for _, fault := range []openaitest.AudioFault{
		{Status: http.StatusTooManyRequests, RetryAfter: 10 * time.Millisecond},
		{Status: http.StatusInternalServerError},
		{Abort: true}, // before any audio
		{Abort: true, AbortAfter: 1},
	} {
		t.Run(fmt.Sprint(fault.Status, fault.Abort, fault.AbortAfter), func(t *testing.T) {
			f := newFixture(t)
			f.srv.QueueSpeechFault(fault)
			st := f.speak(t, t.Context(), text)
			wantAudio(t, readAll(t, st, openai.SourceRate), openaitest.SpeechAudio(text, 1))
			if n := len(f.srv.Requests()); n != 2 {
				t.Errorf("%d requests, want 2", n)
			}
		})
	}
}

// TestErrors: error answers come out of Synthesize with the API's message,
// after the retries for temporary ones, and never show the key.
func TestErrors(t *testing.T) {
	secret := openaitest.APIKey
	for _, tc := range []struct {
		name     string
		faults   []openaitest.AudioFault
		opts     []openai.Option
		status   int
		requests int
		message  string
	}{
		{"bad request", []openaitest.AudioFault{{Status: 400, Message: "Invalid 'input': string too long."}}, nil, 400, 1, "Invalid 'input': string too long."},
		{"unknown voice", nil, []openai.Option{openai.WithVoice("nobody")}, 400, 1, "Invalid value: 'nobody'"},
		{"server errors", repeat(3, openaitest.AudioFault{Status: 503, Message: "overloaded"}), nil, 503, 3, "overloaded"},
		{"long retry-after", []openaitest.AudioFault{{Status: 429, RetryAfter: time.Minute}}, nil, 429, 1, "Rate limit"},
		{"key quoted back", []openaitest.AudioFault{{Status: 401, Message: "Incorrect API key provided: " + secret + "."}}, nil, 401, 1, "Incorrect API key provided: [redacted]."},
		{"wrong key", nil, []openai.Option{openai.WithAPIKey("sk-wrong-key-0123456789")}, 401, 1, "Incorrect API key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			for _, fault := range tc.faults {
				f.srv.QueueSpeechFault(fault)
			}
			st, err := f.synth(t, tc.opts...).Synthesize(t.Context(), text)
			if err == nil {
				st.Close()
				t.Fatal("Synthesize succeeded, want an error")
			}
			if st != nil {
				t.Errorf("Synthesize returned a stream with its error")
			}
			apiErr, ok := errors.AsType[*openai.APIError](err)
			if !ok || apiErr.StatusCode != tc.status {
				t.Errorf("error %v, want an APIError with status %d", err, tc.status)
			}
			if !strings.Contains(err.Error(), tc.message) {
				t.Errorf("error %q does not say %q", err, tc.message)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "sk-wrong") {
				t.Errorf("error %q shows the API key", err)
			}
			if n := int(f.sent.Load()); n != tc.requests {
				t.Errorf("%d requests, want %d", n, tc.requests)
			}
		})
	}
}

func repeat(n int, f openaitest.AudioFault) []openaitest.AudioFault {
	out := make([]openaitest.AudioFault, n)
	for i := range out {
		out[i] = f
	}
	return out
}

// TestBrokenBody: a connection cut after audio has been delivered ends the
// stream with the error; it is not asked again (the caller has heard the
// start already), and no word timings come.
func TestBrokenBody(t *testing.T) {
	f := newFixture(t)
	f.srv.QueueSpeechFault(openaitest.AudioFault{Abort: true, AbortAfter: 4800})
	st := f.speak(t, t.Context(), text)
	r := readAll(t, st, openai.SourceRate)
	if !errors.Is(r.err, io.ErrUnexpectedEOF) {
		t.Errorf("stream ended with %v, want io.ErrUnexpectedEOF", r.err)
	}
	if len(r.samples) != 2400 || len(r.words) != 0 {
		t.Errorf("%d samples and %d words before the cut, want 2400 and none", len(r.samples), len(r.words))
	}
	if n := len(f.srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// TestRequest: the options reach the API.
func TestRequest(t *testing.T) {
	f := newFixture(t)
	st := f.speak(t, t.Context(), text, openai.WithModel("gpt-4o-mini-tts"), openai.WithVoice("coral"),
		openai.WithInstructions("Warm and unhurried."), openai.WithSpeed(2))
	wantAudio(t, readAll(t, st, openai.SourceRate), openaitest.SpeechAudio(text, 2))
	got := requestsOnly(f.srv.Speeches())
	want := []openaitest.Speech{{Model: "gpt-4o-mini-tts", Input: text, Voice: "coral", ResponseFormat: "pcm", Instructions: "Warm and unhurried.", Speed: 2}}
	if !slices.Equal(got, want) {
		t.Errorf("requests %+v, want %+v", got, want)
	}
}

func TestDefaults(t *testing.T) {
	f := newFixture(t)
	t.Setenv(openai.EnvAPIKey, openaitest.APIKey)
	t.Setenv(openai.EnvBaseURL, f.srv.URL())
	s, err := openai.New(openai.WithHTTPClient(&http.Client{Transport: f}))
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Synthesize(t.Context(), "Hi.")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	wantAudio(t, readAll(t, st, openai.SourceRate), openaitest.SpeechAudio("Hi.", 1))
	want := []openaitest.Speech{{Model: openai.DefaultModel, Input: "Hi.", Voice: openai.DefaultVoice, ResponseFormat: "pcm", Speed: 1}}
	if got := requestsOnly(f.srv.Speeches()); !slices.Equal(got, want) {
		t.Errorf("requests %+v, want %+v", got, want)
	}
}

// requestsOnly is what the requests asked for, without when the server
// received and answered them.
func requestsOnly(speeches []openaitest.Speech) []openaitest.Speech {
	out := slices.Clone(speeches)
	for i := range out {
		out[i].Received, out[i].FirstAudio = time.Time{}, time.Time{}
	}
	return out
}

// TestNoWords: text without words asks for nothing and ends at once.
func TestNoWords(t *testing.T) {
	f := newFixture(t)
	st := f.speak(t, t.Context(), " \n ")
	if c, err := st.Recv(); err != io.EOF {
		t.Errorf("Recv = %+v, %v; want io.EOF", c, err)
	}
	if n := len(f.srv.Requests()); n != 0 {
		t.Errorf("%d requests, want none", n)
	}
}

func TestCancelledBefore(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := f.synth(t).Synthesize(ctx, text); !errors.Is(err, context.Canceled) {
		t.Errorf("Synthesize = %v, want context.Canceled", err)
	}
}

func TestNew(t *testing.T) {
	t.Setenv(openai.EnvAPIKey, "")
	t.Setenv(openai.EnvBaseURL, "")
	if _, err := openai.New(); !errors.Is(err, openai.ErrNoAPIKey) {
		t.Errorf("New without a key = %v, want ErrNoAPIKey", err)
	}
	for _, opts := range [][]openai.Option{
		{openai.WithAPIKey("k"), openai.WithBaseURL("://")},
		{openai.WithAPIKey("k"), openai.WithModel("")},
		{openai.WithAPIKey("k"), openai.WithVoice("")},
		{openai.WithAPIKey("k"), openai.WithSpeed(5)},
		{openai.WithAPIKey("k"), openai.WithSpeed(-1)},
		{openai.WithAPIKey("k"), openai.WithSampleRate(11025)},
	} {
		if _, err := openai.New(opts...); err == nil {
			t.Errorf("New(%d options) accepted an invalid configuration", len(opts))
		}
	}
}

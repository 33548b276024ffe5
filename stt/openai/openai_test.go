package openai_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/openaitest"
	"github.com/holdline/holdline/stt"
	"github.com/holdline/holdline/stt/openai"
)

// failAfter bounds every wait in these tests: reaching it is a failure, not
// a way to synchronise.
const failAfter = 10 * time.Second

// fixture is a fake server and a client with a transport of its own, so
// that a test can close its connections and count goroutines.
type fixture struct {
	srv *openaitest.Server
	tr  *http.Transport
	// bodies receives the path of every response body the client closed,
	// that is, every answer it has finished reading.
	bodies chan string
}

func newFixture(t *testing.T, opts ...openaitest.Option) *fixture {
	t.Helper()
	srv := openaitest.New(nil, opts...)
	t.Cleanup(srv.Close)
	f := &fixture{srv: srv, tr: &http.Transport{}, bodies: make(chan string, 100)}
	t.Cleanup(f.tr.CloseIdleConnections)
	return f
}

func (f *fixture) client() *http.Client { return &http.Client{Transport: f} }

// RoundTrip makes the fixture a transport that reports closed bodies.
func (f *fixture) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := f.tr.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &reportingBody{ReadCloser: resp.Body, path: req.URL.Path, ch: f.bodies}
	return resp, nil
}

type reportingBody struct {
	io.ReadCloser
	path string
	ch   chan<- string
	once sync.Once
}

func (b *reportingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() { b.ch <- b.path })
	return err
}

// waitBodies waits until the client has read n more answers.
func (f *fixture) waitBodies(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(failAfter)
	for range n {
		select {
		case <-f.bodies:
		case <-timeout:
			t.Fatalf("the client did not finish reading %d answers", n)
		}
	}
}

func (f *fixture) recognizer(t *testing.T, opts ...openai.Option) *openai.Recognizer {
	t.Helper()
	base := []openai.Option{
		openai.WithBaseURL(f.srv.URL()),
		openai.WithAPIKey(openaitest.APIKey),
		openai.WithHTTPClient(f.client()),
	}
	rec, err := openai.New(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func (f *fixture) stream(t *testing.T, ctx context.Context, rate int, opts ...openai.Option) stt.Stream {
	t.Helper()
	s, err := f.recognizer(t, opts...).Stream(ctx, rate)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// write feeds samples in 20 ms frames, as a session does.
func write(t *testing.T, s stt.Stream, samples []int16, rate int) {
	t.Helper()
	n := media.SamplesFor(rate, 20*time.Millisecond)
	for len(samples) > 0 {
		k := min(n, len(samples))
		if err := s.Write(media.Frame{Samples: samples[:k], SampleRate: rate}); err != nil {
			t.Fatal(err)
		}
		samples = samples[k:]
	}
}

func constant(v int16, n int) []int16 {
	s := make([]int16, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// ramp returns n samples whose values are their index, from first, over div.
func ramp(first, n, div int) []int16 {
	s := make([]int16, n)
	for i := range s {
		s[i] = int16((first + i) / div)
	}
	return s
}

func start(t *testing.T, s stt.Stream) {
	t.Helper()
	if err := s.(stt.SpeechStarter).StartOfSpeech(); err != nil {
		t.Fatal(err)
	}
}

func end(t *testing.T, s stt.Stream) {
	t.Helper()
	if err := s.EndOfSpeech(); err != nil {
		t.Fatal(err)
	}
}

type recvResult struct {
	tr  stt.Transcript
	err error
}

// recvAsync calls Recv on a goroutine, so a test can bound the wait.
func recvAsync(s stt.Stream) <-chan recvResult {
	ch := make(chan recvResult, 1)
	go func() {
		tr, err := s.Recv()
		ch <- recvResult{tr, err}
	}()
	return ch
}

func recv(t *testing.T, s stt.Stream) (stt.Transcript, error) {
	t.Helper()
	select {
	case r := <-recvAsync(s):
		return r.tr, r.err
	case <-time.After(failAfter):
		t.Fatal("Recv did not return")
		return stt.Transcript{}, nil
	}
}

func wantFinal(t *testing.T, s stt.Stream, text string) {
	t.Helper()
	tr, err := recv(t, s)
	if err != nil {
		t.Fatalf("Recv: %v, want %q", err, text)
	}
	if tr.Text != text || !tr.Final {
		t.Fatalf("Recv = %+v, want final %q", tr, text)
	}
}

func wantEOF(t *testing.T, s stt.Stream) {
	t.Helper()
	if tr, err := recv(t, s); err != io.EOF {
		t.Fatalf("Recv = %+v, %v; want io.EOF", tr, err)
	}
}

// TestOrder has the first of three utterances answered last: the
// transcripts still come out in utterance order.
func TestOrder(t *testing.T) {
	f := newFixture(t)
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before the server closes: the handler waits on it
	f.srv.SetTranscriber(func(audio []int16, rate int) string {
		if audio[0] == 1000 {
			<-release
		}
		return fmt.Sprintf("utterance %d", audio[0]/1000)
	})
	s := f.stream(t, t.Context(), media.Rate16k)
	for k := range int16(3) {
		start(t, s)
		write(t, s, constant(1000*(k+1), 3200), media.Rate16k)
		end(t, s)
	}
	// The client has the second and third answers before the server
	// answers the first.
	f.waitBodies(t, 2)
	unblock()
	for k := range 3 {
		wantFinal(t, s, fmt.Sprintf("utterance %d", k+1))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wantEOF(t, s)
}

// TestPreRoll checks that an utterance starts with the audio from just
// before StartOfSpeech, and what else is uploaded.
func TestPreRoll(t *testing.T) {
	f := newFixture(t)
	s := f.stream(t, t.Context(), media.Rate16k,
		openai.WithLanguage("en"), openai.WithPrompt("Table bookings."), openai.WithModel("whisper-1"))
	write(t, s, ramp(0, 16000, 1), media.Rate16k) // 1 s before the start
	start(t, s)
	write(t, s, ramp(16000, 8000, 1), media.Rate16k)
	end(t, s)
	wantFinal(t, s, "utterance 1")

	ups := f.srv.Transcriptions()
	if len(ups) != 1 {
		t.Fatalf("%d uploads, want 1", len(ups))
	}
	up := ups[0]
	preRoll := media.SamplesFor(media.Rate16k, openai.DefaultPreRoll)
	if want := preRoll + 8000; len(up.Audio) != want {
		t.Errorf("uploaded %d samples, want %d (300 ms pre-roll + 500 ms)", len(up.Audio), want)
	}
	for i, v := range up.Audio {
		if want := int16(16000 - preRoll + i); v != want {
			t.Fatalf("sample %d = %d, want %d: the audio is not the pre-roll followed by the speech", i, v, want)
		}
	}
	if up.SampleRate != media.Rate16k || up.Model != "whisper-1" || up.Language != "en" ||
		up.Prompt != "Table bookings." || up.ResponseFormat != "json" {
		t.Errorf("upload = rate %d, model %q, language %q, prompt %q, format %q",
			up.SampleRate, up.Model, up.Language, up.Prompt, up.ResponseFormat)
	}
}

// TestUtteranceCap: an utterance longer than the maximum is sent in pieces
// as it goes, without losing or repeating audio.
func TestUtteranceCap(t *testing.T) {
	f := newFixture(t)
	f.srv.SetTranscriber(func(audio []int16, rate int) string {
		return fmt.Sprintf("%d from %d", len(audio), audio[0])
	})
	s := f.stream(t, t.Context(), media.Rate16k, openai.WithMaxUtterance(time.Second), openai.WithPreRoll(0))
	start(t, s)
	write(t, s, ramp(0, 40000, 10), media.Rate16k) // 2.5 s
	// The first two pieces are on their way before the speech ends.
	f.waitBodies(t, 2)
	end(t, s)
	wantFinal(t, s, "16000 from 0")
	wantFinal(t, s, "16000 from 1600")
	wantFinal(t, s, "8000 from 3200")
}

// TestWithoutStartOfSpeech: a session that only calls EndOfSpeech gets the
// audio since the previous one, capped; too short an utterance is not sent.
func TestWithoutStartOfSpeech(t *testing.T) {
	f := newFixture(t)
	f.srv.SetTranscriber(func(audio []int16, rate int) string {
		return fmt.Sprintf("%d from %d", len(audio), audio[0])
	})
	s := f.stream(t, t.Context(), media.Rate16k, openai.WithMaxUtterance(300*time.Millisecond), openai.WithPreRoll(100*time.Millisecond))
	write(t, s, ramp(0, 3200, 10), media.Rate16k) // 200 ms
	end(t, s)
	write(t, s, ramp(3200, 800, 10), media.Rate16k) // 50 ms: not sent
	end(t, s)
	write(t, s, ramp(4000, 8000, 10), media.Rate16k) // 500 ms: the last 300 ms sent
	end(t, s)
	wantFinal(t, s, "3200 from 0")
	wantFinal(t, s, "4800 from 720")
	if n := len(f.srv.Requests()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

// TestShortUtterance: less than 100 ms is never uploaded, with or without
// StartOfSpeech.
func TestShortUtterance(t *testing.T) {
	f := newFixture(t)
	s := f.stream(t, t.Context(), media.Rate16k, openai.WithPreRoll(0))
	start(t, s)
	write(t, s, constant(1, 1599), media.Rate16k)
	end(t, s)
	start(t, s)
	write(t, s, constant(1, 1600), media.Rate16k)
	end(t, s)
	wantFinal(t, s, "utterance 1")
	if ups := f.srv.Transcriptions(); len(ups) != 1 || len(ups[0].Audio) != 1600 {
		t.Errorf("uploads %v, want one of 1600 samples", ups)
	}
}

// TestEmptyTranscript: an utterance heard as nothing yields nothing.
func TestEmptyTranscript(t *testing.T) {
	f := newFixture(t)
	f.srv.SetTranscriber(func(audio []int16, rate int) string {
		if audio[0] == 1 {
			return " "
		}
		return " Hello."
	})
	s := f.stream(t, t.Context(), media.Rate16k)
	for k := range int16(2) {
		start(t, s)
		write(t, s, constant(k+1, 3200), media.Rate16k)
		end(t, s)
	}
	wantFinal(t, s, "Hello.")
}

// TestResample: audio above 16 kHz is uploaded at 16 kHz.
func TestResample(t *testing.T) {
	f := newFixture(t)
	s := f.stream(t, t.Context(), media.Rate48k)
	write(t, s, constant(1000, 48000), media.Rate48k)
	end(t, s)
	wantFinal(t, s, "utterance 1")
	up := f.srv.Transcriptions()[0]
	if up.SampleRate != media.Rate16k || len(up.Audio) != 16000 {
		t.Errorf("uploaded %d samples at %d Hz, want 16000 at 16000 Hz", len(up.Audio), up.SampleRate)
	}
	// Past the filter's start-up, a constant stays that constant.
	if v := up.Audio[8000]; v < 990 || v > 1010 {
		t.Errorf("mid-utterance sample %d, want about 1000", v)
	}
}

func TestRetry(t *testing.T) {
	for _, fault := range []openaitest.AudioFault{
		{Status: http.StatusTooManyRequests, RetryAfter: 10 * time.Millisecond},
		{Status: http.StatusServiceUnavailable},
		{Abort: true},
	} {
		t.Run(fmt.Sprint(fault.Status, fault.Abort), func(t *testing.T) {
			f := newFixture(t)
			f.srv.QueueTranscriptionFault(fault)
			s := f.stream(t, t.Context(), media.Rate16k)
			write(t, s, constant(1, 3200), media.Rate16k)
			end(t, s)
			wantFinal(t, s, "utterance 1")
			if n := len(f.srv.Requests()); n != 2 {
				t.Errorf("%d requests, want 2", n)
			}
		})
	}
}

// TestErrors: a failed upload fails the stream with the API's word for it,
// and never shows the key.
func TestErrors(t *testing.T) {
	secret := openaitest.APIKey
	for _, tc := range []struct {
		name     string
		faults   []openaitest.AudioFault
		status   int // 0: not an API error
		requests int
		message  string
	}{
		{"server errors", repeat(3, openaitest.AudioFault{Status: 500, Message: "boom"}), 500, 3, "boom"},
		{"rate limited", repeat(3, openaitest.AudioFault{Status: 429, RetryAfter: time.Millisecond}), 429, 3, "Rate limit"},
		{"long retry-after", []openaitest.AudioFault{{Status: 429, RetryAfter: time.Minute}}, 429, 1, "Rate limit"},
		{"bad request", []openaitest.AudioFault{{Status: 400, Message: "Invalid file format."}}, 400, 1, "Invalid file format."},
		{"key quoted back", []openaitest.AudioFault{{Status: 401, Message: "Incorrect API key provided: " + secret + "."}}, 401, 1, "Incorrect API key provided: [redacted]."},
		{"connection cut", repeat(3, openaitest.AudioFault{Abort: true}), 0, 3, "EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			for _, fault := range tc.faults {
				f.srv.QueueTranscriptionFault(fault)
			}
			s := f.stream(t, t.Context(), media.Rate16k)
			write(t, s, constant(1, 3200), media.Rate16k)
			end(t, s)
			_, err := recv(t, s)
			if err == nil || err == io.EOF {
				t.Fatalf("Recv error = %v, want a failure", err)
			}
			apiErr, ok := errors.AsType[*openai.APIError](err)
			switch {
			case tc.status == 0 && ok:
				t.Errorf("error %v is an APIError", err)
			case tc.status != 0 && (!ok || apiErr.StatusCode != tc.status):
				t.Errorf("error %v, want an APIError with status %d", err, tc.status)
			}
			if !strings.Contains(err.Error(), tc.message) || !strings.Contains(err.Error(), "utterance 1") {
				t.Errorf("error %q does not say %q about utterance 1", err, tc.message)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q shows the API key", err)
			}
			if n := len(f.srv.Requests()); n != tc.requests {
				t.Errorf("%d requests, want %d", n, tc.requests)
			}
			// The stream stays failed.
			if _, err2 := recv(t, s); err2 != err {
				t.Errorf("second Recv = %v, want %v again", err2, err)
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

// TestWrongKey: a key the server refuses is reported without showing it.
func TestWrongKey(t *testing.T) {
	f := newFixture(t)
	const key = "sk-wrong-key-0123456789"
	s := f.stream(t, t.Context(), media.Rate16k, openai.WithAPIKey(key))
	write(t, s, constant(1, 3200), media.Rate16k)
	end(t, s)
	_, err := recv(t, s)
	if apiErr, ok := errors.AsType[*openai.APIError](err); !ok || apiErr.StatusCode != 401 || apiErr.Code != "invalid_api_key" {
		t.Fatalf("Recv error = %v, want a 401 invalid_api_key", err)
	}
	if strings.Contains(err.Error(), key) {
		t.Errorf("error %q shows the API key", err)
	}
}

func TestTimeout(t *testing.T) {
	f := newFixture(t)
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	f.srv.QueueTranscriptionFault(openaitest.AudioFault{Hold: hold})
	s := f.stream(t, t.Context(), media.Rate16k, openai.WithTimeout(100*time.Millisecond))
	write(t, s, constant(1, 3200), media.Rate16k)
	end(t, s)
	_, err := recv(t, s)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no answer within 100ms") {
		t.Fatalf("Recv error = %v, want a deadline error", err)
	}
}

// TestCloseEndsRecv: Close wakes a waiting Recv with io.EOF, and the
// stream takes no more audio.
func TestCloseEndsRecv(t *testing.T) {
	f := newFixture(t)
	s := f.stream(t, t.Context(), media.Rate16k)
	got := recvAsync(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.err != io.EOF {
			t.Fatalf("Recv = %+v, %v; want io.EOF", r.tr, r.err)
		}
	case <-time.After(failAfter):
		t.Fatal("Recv did not return after Close")
	}
	if err := s.Write(media.Frame{Samples: make([]int16, 320), SampleRate: media.Rate16k}); !errors.Is(err, openai.ErrClosed) {
		t.Errorf("Write after Close = %v, want ErrClosed", err)
	}
	if err := s.EndOfSpeech(); !errors.Is(err, openai.ErrClosed) {
		t.Errorf("EndOfSpeech after Close = %v, want ErrClosed", err)
	}
	if err := s.(stt.SpeechStarter).StartOfSpeech(); !errors.Is(err, openai.ErrClosed) {
		t.Errorf("StartOfSpeech after Close = %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	wantEOF(t, s)
}

// TestCloseCancelsUploads: Close abandons the upload in flight, delivers
// what had already arrived, and leaves no goroutine behind.
func TestCloseCancelsUploads(t *testing.T) {
	f := newFixture(t)
	before := runtime.NumGoroutine()
	arrived, hold := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(hold) })
	f.srv.SetTranscriber(func(audio []int16, rate int) string { return fmt.Sprint("utterance ", audio[0]) })

	rec := f.recognizer(t)
	s, err := rec.Stream(t.Context(), media.Rate16k)
	if err != nil {
		t.Fatal(err)
	}
	write(t, s, constant(1, 3200), media.Rate16k)
	end(t, s)
	f.waitBodies(t, 1) // the first answer is in
	f.srv.QueueTranscriptionFault(openaitest.AudioFault{Arrived: arrived, Hold: hold})
	write(t, s, constant(2, 3200), media.Rate16k)
	end(t, s)
	select {
	case <-arrived:
	case <-time.After(failAfter):
		t.Fatal("the second upload never arrived")
	}

	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(failAfter):
		t.Fatal("Close did not return with an upload in flight")
	}
	wantFinal(t, s, "utterance 1")
	wantEOF(t, s)

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

// TestCancel: cancelling the stream's context ends it at once.
func TestCancel(t *testing.T) {
	f := newFixture(t)
	arrived, hold := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(hold) })
	f.srv.QueueTranscriptionFault(openaitest.AudioFault{Arrived: arrived, Hold: hold})
	ctx, cancel := context.WithCancel(t.Context())
	s := f.stream(t, ctx, media.Rate16k)
	write(t, s, constant(1, 3200), media.Rate16k)
	end(t, s)
	<-arrived
	got := recvAsync(s)
	cancel()
	select {
	case r := <-got:
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("Recv = %+v, %v; want context.Canceled", r.tr, r.err)
		}
	case <-time.After(failAfter):
		t.Fatal("Recv did not return after cancel")
	}
	if err := s.Write(media.Frame{Samples: make([]int16, 320), SampleRate: media.Rate16k}); !errors.Is(err, context.Canceled) {
		t.Errorf("Write after cancel = %v, want context.Canceled", err)
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
}

func TestNew(t *testing.T) {
	t.Setenv(openai.EnvAPIKey, "")
	t.Setenv(openai.EnvBaseURL, "")
	if _, err := openai.New(); !errors.Is(err, openai.ErrNoAPIKey) {
		t.Errorf("New without a key = %v, want ErrNoAPIKey", err)
	}
	for _, opts := range [][]openai.Option{
		{openai.WithAPIKey("k"), openai.WithBaseURL("ftp://x")},
		{openai.WithAPIKey("k"), openai.WithModel("")},
		{openai.WithAPIKey("k"), openai.WithMaxUtterance(50 * time.Millisecond)},
		{openai.WithAPIKey("k"), openai.WithPreRoll(-time.Second)},
		{openai.WithAPIKey("k"), openai.WithPreRoll(time.Second), openai.WithMaxUtterance(time.Second)},
		{openai.WithAPIKey("k"), openai.WithTimeout(0)},
	} {
		if _, err := openai.New(opts...); err == nil {
			t.Errorf("New(%d options) accepted an invalid configuration", len(opts))
		}
	}
	rec, err := openai.New(openai.WithAPIKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Stream(t.Context(), 11025); !errors.Is(err, media.ErrUnsupportedRate) {
		t.Errorf("Stream at 11025 Hz = %v, want ErrUnsupportedRate", err)
	}
}

// TestEnvironment: the key and base URL come from the environment.
func TestEnvironment(t *testing.T) {
	f := newFixture(t)
	t.Setenv(openai.EnvAPIKey, openaitest.APIKey)
	t.Setenv(openai.EnvBaseURL, f.srv.URL())
	rec, err := openai.New(openai.WithHTTPClient(f.client()))
	if err != nil {
		t.Fatal(err)
	}
	s, err := rec.Stream(t.Context(), media.Rate8k)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	write(t, s, constant(1, 800), media.Rate8k)
	end(t, s)
	wantFinal(t, s, "utterance 1")
}

func TestWrongRate(t *testing.T) {
	f := newFixture(t)
	s := f.stream(t, t.Context(), media.Rate16k)
	if err := s.Write(media.Frame{Samples: make([]int16, 160), SampleRate: media.Rate8k}); err == nil {
		t.Error("Write accepted an 8 kHz frame on a 16 kHz stream")
	}
}

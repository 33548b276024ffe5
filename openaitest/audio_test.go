package openaitest_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/openaitest"
)

// upload builds a transcription request body; file may be nil.
func upload(t *testing.T, fields map[string]string, filename string, file []byte) (*bytes.Buffer, string) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for k, v := range fields {
		mw.WriteField(k, v)
	}
	if file != nil {
		h := make(textproto.MIMEHeader)
		h.Set("Content-Disposition", `form-data; name="file"; filename="`+filename+`"`)
		h.Set("Content-Type", "audio/wav")
		part, err := mw.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		part.Write(file)
	}
	mw.Close()
	return &body, mw.FormDataContentType()
}

func wav(t *testing.T, samples []int16, rate int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := media.WriteWAV(&b, samples, rate); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func post(t *testing.T, url, ctype string, body io.Reader) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+openaitest.APIKey)
	req.Header.Set("Content-Type", ctype)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// apiError decodes an OpenAI error answer.
func apiError(t *testing.T, resp *http.Response) (status int, message string) {
	t.Helper()
	var e struct {
		Error struct{ Message string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatalf("error body: %v", err)
	}
	return resp.StatusCode, e.Error.Message
}

func TestTranscription(t *testing.T) {
	srv := openaitest.New(nil)
	defer srv.Close()
	samples := make([]int16, 8000)
	samples[0] = 42
	body, ctype := upload(t, map[string]string{"model": "gpt-4o-mini-transcribe", "language": "en", "prompt": "p"}, "a.wav", wav(t, samples, 16000))
	resp := post(t, srv.URL()+"/audio/transcriptions", ctype, body)
	var out struct{ Text string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d, %v", resp.StatusCode, err)
	}
	if out.Text != "utterance 1" {
		t.Errorf("text %q, want the default %q", out.Text, "utterance 1")
	}
	got := srv.Transcriptions()
	if len(got) != 1 || len(got[0].Audio) != 8000 || got[0].Audio[0] != 42 || got[0].SampleRate != 16000 ||
		got[0].Language != "en" || got[0].Prompt != "p" || got[0].ResponseFormat != "json" || got[0].Filename != "a.wav" {
		t.Errorf("recorded %+v", got)
	}

	srv.SetTranscriber(func(audio []int16, rate int) string { return "custom" })
	body, ctype = upload(t, map[string]string{"model": "whisper-1", "response_format": "text"}, "b.wav", wav(t, samples, 8000))
	resp = post(t, srv.URL()+"/audio/transcriptions", ctype, body)
	if text, _ := io.ReadAll(resp.Body); string(text) != "custom\n" {
		t.Errorf("text answer %q", text)
	}
}

func TestTranscriptionValidation(t *testing.T) {
	srv := openaitest.New(nil)
	defer srv.Close()
	ok := wav(t, make([]int16, 1600), 16000)
	for _, tc := range []struct {
		name     string
		fields   map[string]string
		filename string
		file     []byte
		message  string
	}{
		{"no model", nil, "a.wav", ok, "model"},
		{"no file", map[string]string{"model": "whisper-1"}, "", nil, "file"},
		{"not a WAV", map[string]string{"model": "whisper-1"}, "a.wav", []byte("ID3 mp3 data here"), "Invalid file format"},
		{"too short", map[string]string{"model": "whisper-1"}, "a.wav", wav(t, make([]int16, 1599), 16000), "too short"},
		{"unknown field", map[string]string{"model": "whisper-1", "modle": "x"}, "a.wav", ok, "Unrecognized request argument supplied: modle"},
		{"bad language", map[string]string{"model": "whisper-1", "language": "English"}, "a.wav", ok, "ISO-639-1"},
		{"verbose json on gpt-4o", map[string]string{"model": "gpt-4o-transcribe", "response_format": "verbose_json"}, "a.wav", ok, "not compatible"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, ctype := upload(t, tc.fields, tc.filename, tc.file)
			status, msg := apiError(t, post(t, srv.URL()+"/audio/transcriptions", ctype, body))
			if status != 400 || !strings.Contains(msg, tc.message) {
				t.Errorf("status %d %q, want 400 saying %q", status, msg, tc.message)
			}
		})
	}
	if n := len(srv.Transcriptions()); n != 0 {
		t.Errorf("%d transcriptions recorded from invalid requests", n)
	}
}

func TestTranscriptionFaults(t *testing.T) {
	srv := openaitest.New(nil)
	defer srv.Close()
	arrived, hold := make(chan struct{}), make(chan struct{})
	srv.QueueTranscriptionFault(openaitest.AudioFault{Status: 429, RetryAfter: 1500 * time.Millisecond})
	srv.QueueTranscriptionFault(openaitest.AudioFault{Arrived: arrived, Hold: hold, Status: 500, Message: "boom"})
	srv.QueueTranscriptionFault(openaitest.AudioFault{Abort: true})
	file := wav(t, make([]int16, 1600), 16000)
	send := func() *http.Response {
		body, ctype := upload(t, map[string]string{"model": "whisper-1"}, "a.wav", file)
		return post(t, srv.URL()+"/audio/transcriptions", ctype, body)
	}

	resp := send()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" || resp.Header.Get("Retry-After-Ms") != "1500" {
		t.Errorf("status %d, Retry-After %q, retry-after-ms %q", resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("Retry-After-Ms"))
	}

	got := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, srv.URL()+"/audio/transcriptions", strings.NewReader("x"))
		req.Header.Set("Authorization", "Bearer "+openaitest.APIKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- nil
			return
		}
		got <- resp
	}()
	<-arrived
	select {
	case <-got:
		t.Fatal("answered while held")
	default:
	}
	close(hold)
	resp = <-got
	if resp == nil {
		t.Fatal("held request failed")
	}
	defer resp.Body.Close()
	if status, msg := apiError(t, resp); status != 500 || msg != "boom" {
		t.Errorf("held answer %d %q, want 500 boom", status, msg)
	}

	body, ctype := upload(t, map[string]string{"model": "whisper-1"}, "a.wav", file)
	req, _ := http.NewRequest(http.MethodPost, srv.URL()+"/audio/transcriptions", body)
	req.Header.Set("Authorization", "Bearer "+openaitest.APIKey)
	req.Header.Set("Content-Type", ctype)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("aborted request answered %d", resp.StatusCode)
	}

	// The queue is empty: the next one succeeds.
	if resp := send(); resp.StatusCode != 200 {
		t.Errorf("status %d after the faults", resp.StatusCode)
	}
}

func speech(t *testing.T, srv *openaitest.Server, req map[string]any) *http.Response {
	t.Helper()
	b, _ := json.Marshal(req)
	return post(t, srv.URL()+"/audio/speech", "application/json", bytes.NewReader(b))
}

func pcm(b []byte) []int16 {
	out := make([]int16, len(b)/2)
	for i := range out {
		out[i] = int16(binary.LittleEndian.Uint16(b[2*i:]))
	}
	return out
}

func equal(a, b []int16) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSpeech(t *testing.T) {
	srv := openaitest.New(nil)
	defer srv.Close()
	srv.SetSpeechPace(openaitest.SpeechPace{PieceBytes: 101})
	resp := speech(t, srv, map[string]any{"model": "gpt-4o-mini-tts", "input": "Hello", "voice": "alloy", "response_format": "pcm", "instructions": "Calm.", "speed": 1.0})
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d, %v", resp.StatusCode, err)
	}
	want := openaitest.SpeechAudio("Hello", 1)
	if len(want) != 5*1440 {
		t.Fatalf("SpeechAudio gave %d samples for 5 characters, want 5*60 ms at 24 kHz", len(want))
	}
	if !equal(pcm(b), want) {
		t.Error("the pcm body is not SpeechAudio")
	}
	peak := int16(0)
	for _, v := range want {
		peak = max(peak, v)
	}
	if peak < 3000 || peak > 3400 {
		t.Errorf("peak %d, want a -20 dBFS tone", peak)
	}

	resp = speech(t, srv, map[string]any{"model": "tts-1", "input": "Hello", "voice": "echo", "response_format": "wav", "speed": 2})
	samples, rate, err := media.ReadWAV(resp.Body)
	if err != nil || rate != openaitest.SpeechRate || !equal(samples, openaitest.SpeechAudio("Hello", 2)) {
		t.Errorf("wav answer: %d samples at %d Hz, %v", len(samples), rate, err)
	}
	got := srv.Speeches()
	if len(got) != 2 || got[0].Instructions != "Calm." || got[1].Speed != 2 || got[1].ResponseFormat != "wav" {
		t.Errorf("recorded %+v", got)
	}
}

func TestSpeechValidation(t *testing.T) {
	srv := openaitest.New(nil)
	defer srv.Close()
	base := func() map[string]any {
		return map[string]any{"model": "gpt-4o-mini-tts", "input": "Hi", "voice": "alloy", "response_format": "pcm"}
	}
	for _, tc := range []struct {
		name    string
		edit    func(map[string]any)
		message string
	}{
		{"no model", func(m map[string]any) { delete(m, "model") }, "'model'"},
		{"no input", func(m map[string]any) { m["input"] = "" }, "'input'"},
		{"no voice", func(m map[string]any) { delete(m, "voice") }, "'voice'"},
		{"unknown voice", func(m map[string]any) { m["voice"] = "bob" }, "Invalid value: 'bob'"},
		{"mp3 by default", func(m map[string]any) { delete(m, "response_format") }, "pcm or wav"},
		{"unknown field", func(m map[string]any) { m["format"] = "pcm" }, "Unrecognized request argument supplied: format"},
		{"speed", func(m map[string]any) { m["speed"] = 5 }, "speed"},
		{"instructions on tts-1", func(m map[string]any) { m["model"], m["instructions"] = "tts-1", "x" }, "Instructions"},
		{"too long", func(m map[string]any) { m["input"] = strings.Repeat("a", 4097) }, "too long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := base()
			tc.edit(m)
			status, msg := apiError(t, speech(t, srv, m))
			if status != 400 || !strings.Contains(msg, tc.message) {
				t.Errorf("status %d %q, want 400 saying %q", status, msg, tc.message)
			}
		})
	}
}

func TestSpeechPace(t *testing.T) {
	srv := openaitest.New(nil)
	defer srv.Close()
	// 20 characters: 1.2 s of audio, at 8 times real time 150 ms.
	srv.SetSpeechPace(openaitest.SpeechPace{Realtime: 8})
	start := time.Now()
	resp := speech(t, srv, map[string]any{"model": "tts-1", "input": strings.Repeat("a", 20), "voice": "alloy", "response_format": "pcm"})
	b, err := io.ReadAll(resp.Body)
	if err != nil || len(b) != 2*20*1440 {
		t.Fatalf("%d bytes, %v", len(b), err)
	}
	// The last piece leaves when the audio before it has played: 1.18 s
	// of audio at 8 times real time.
	if d := time.Since(start); d < 147*time.Millisecond {
		t.Errorf("paced body took %v, want at least 147 ms", d)
	}
}

func TestSpeechFaults(t *testing.T) {
	srv := openaitest.New(nil)
	defer srv.Close()
	req := map[string]any{"model": "tts-1", "input": "Hello there", "voice": "alloy", "response_format": "pcm"}
	full := 2 * len(openaitest.SpeechAudio("Hello there", 1))

	// Held mid-body: the first bytes arrive, the rest waits.
	hold := make(chan struct{})
	srv.QueueSpeechFault(openaitest.AudioFault{Hold: hold, HoldAfter: 1001})
	resp := speech(t, srv, req)
	first := make([]byte, 1001)
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatal(err)
	}
	close(hold)
	rest, err := io.ReadAll(resp.Body)
	if err != nil || 1001+len(rest) != full {
		t.Errorf("%d bytes after the hold, %v; want %d in all", len(rest), err, full)
	}

	// Cut mid-body.
	srv.QueueSpeechFault(openaitest.AudioFault{Abort: true, AbortAfter: 777})
	resp = speech(t, srv, req)
	b, err := io.ReadAll(resp.Body)
	if len(b) != 777 || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut body: %d bytes, %v; want 777 and io.ErrUnexpectedEOF", len(b), err)
	}

	// A status, after a delay.
	srv.QueueSpeechFault(openaitest.AudioFault{Status: 503, Delay: 20 * time.Millisecond})
	start := time.Now()
	status, msg := apiError(t, speech(t, srv, req))
	if status != 503 || msg == "" || time.Since(start) < 20*time.Millisecond {
		t.Errorf("got %d %q after %v", status, msg, time.Since(start))
	}
}

package openaitest

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/holdline/holdline/media"
)

// Audio endpoint constants. The speech endpoint's audio is a tone whose
// length follows the text, so a test can tell how much of it arrived and
// compare it with [SpeechAudio] sample by sample.
const (
	// SpeechRate is the sample rate of the speech endpoint's pcm format, as
	// OpenAI's: raw 16-bit little-endian mono at 24 kHz, no header.
	SpeechRate = 24000
	// SpeechPerChar is how long each character of the input is spoken, at
	// speed 1.
	SpeechPerChar = 60 * time.Millisecond
	// SpeechToneHz and SpeechToneDBFS describe the tone: quiet but not
	// silent, so level meters and voice detectors see something.
	SpeechToneHz   = 220
	SpeechToneDBFS = -20

	// DefaultSpeechPiece is how many bytes of audio the speech endpoint
	// writes and flushes at a time unless SetSpeechPace says otherwise:
	// 20 ms at 24 kHz.
	DefaultSpeechPiece = 960

	// maxUpload is the transcription endpoint's file size limit, as the
	// real API's.
	maxUpload = 25 << 20
	// maxSpeechInput is the longest input the speech endpoint accepts, in
	// characters, as the real API's.
	maxSpeechInput = 4096
	// minTranscribe is the shortest audio the real API transcribes; shorter
	// files get a 400.
	minTranscribe = 100 * time.Millisecond
)

// Transcription is one upload to /v1/audio/transcriptions that the server
// accepted and transcribed, as it decoded it.
type Transcription struct {
	// Model, Language, Prompt and ResponseFormat are the request's form
	// fields of those names ("json" when response_format was not sent).
	Model, Language, Prompt, ResponseFormat string
	// Filename is the uploaded file's name.
	Filename string
	// Audio is the decoded WAV, downmixed to mono, at SampleRate (Hz).
	Audio      []int16
	SampleRate int
	// Text is what the server answered.
	Text string
	// Received is when the upload arrived, Answered when the answer was
	// sent.
	Received, Answered time.Time
}

// Speech is one request to /v1/audio/speech that the server accepted.
type Speech struct {
	// Model, Input (the text), Voice, ResponseFormat ("pcm" or "wav")
	// and Instructions are the request's fields of those names.
	Model, Input, Voice, ResponseFormat, Instructions string
	// Speed is 1 when the request did not set it.
	Speed float64
	// Received is when the request arrived. FirstAudio is when the first
	// piece of audio was sent (zero until it is, and for a request whose
	// answer was cut before any).
	Received, FirstAudio time.Time
}

// AudioFault is queued with QueueTranscriptionFault or QueueSpeechFault and
// taken by the next request to that endpoint, in arrival order, before the
// request is validated. Its parts apply in this order: Arrived, Delay,
// Hold, then Status or Abort; a fault with neither goes on to the normal
// answer (with, for the speech endpoint, the mid-body Hold and Abort).
type AudioFault struct {
	// Arrived, if not nil, is closed when a request takes this fault, so a
	// test knows the request is in flight without sleeping.
	Arrived chan struct{}
	// Delay holds the response back for this long before its first byte.
	Delay time.Duration
	// Hold, if not nil, holds the response until Hold is closed or the
	// client goes away: before the first byte, or, for the speech endpoint
	// with HoldAfter > 0, after HoldAfter bytes of the body.
	Hold      <-chan struct{}
	HoldAfter int
	// Status, if not 0, answers with this status and an OpenAI error body
	// carrying Message (or a default for the status). The answer carries
	// Retry-After (whole seconds, rounded up) and OpenAI's retry-after-ms
	// headers when RetryAfter is set.
	Status     int
	Message    string
	RetryAfter time.Duration
	// Abort cuts the connection without finishing the response: for the
	// transcription endpoint before any byte, for the speech endpoint
	// after the headers and AbortAfter bytes of the body (the client reads
	// io.ErrUnexpectedEOF).
	Abort      bool
	AbortAfter int
}

// SpeechPace says how /v1/audio/speech streams its body.
type SpeechPace struct {
	// PieceBytes is the size of each flushed write (default
	// DefaultSpeechPiece). An odd size splits samples across writes, as
	// real servers' TCP segments do.
	PieceBytes int
	// Realtime paces the pieces at this multiple of real time: with 1 each
	// piece leaves when its audio would start playing, with 4 four times
	// sooner. 0 sends them as fast as the connection takes them.
	Realtime float64
}

type audioState struct {
	transcriber    func(audio []int16, rate int) string
	transcribed    int // transcriber calls, for the default text
	transcriptions []Transcription
	speeches       []Speech
	sttFaults      []AudioFault
	ttsFaults      []AudioFault
	pace           SpeechPace
}

func (s *Server) routeAudio(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/audio/transcriptions", s.handleTranscription)
	mux.HandleFunc("POST /v1/audio/speech", s.handleSpeech)
}

// SetTranscriber sets what the transcription endpoint answers for the
// audio it decoded (mono samples at rate). It may block, to hold one
// answer back while others go; it is called without any lock held, once
// per accepted upload, possibly from several goroutines at once. nil
// restores the default, which answers "utterance N" for the N-th upload
// transcribed.
func (s *Server) SetTranscriber(f func(audio []int16, rate int) string) {
	s.mu.Lock()
	s.audio.transcriber = f
	s.mu.Unlock()
}

// Transcriptions returns the uploads transcribed so far, in the order they
// were answered. Uploads answered with a fault's status
// are not included; Requests has every request.
func (s *Server) Transcriptions() []Transcription {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.audio.transcriptions)
}

// Speeches returns the accepted speech requests so far, in arrival order.
func (s *Server) Speeches() []Speech {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.audio.speeches)
}

// QueueTranscriptionFault queues f for the next transcription request that
// has not taken one.
func (s *Server) QueueTranscriptionFault(f AudioFault) {
	s.mu.Lock()
	s.audio.sttFaults = append(s.audio.sttFaults, f)
	s.mu.Unlock()
}

// QueueSpeechFault queues f for the next speech request that has not taken
// one.
func (s *Server) QueueSpeechFault(f AudioFault) {
	s.mu.Lock()
	s.audio.ttsFaults = append(s.audio.ttsFaults, f)
	s.mu.Unlock()
}

// SetSpeechPace sets how the speech endpoint streams its audio.
func (s *Server) SetSpeechPace(p SpeechPace) {
	s.mu.Lock()
	s.audio.pace = p
	s.mu.Unlock()
}

// SpeechAudio returns the audio the speech endpoint speaks for input at
// speed (0 means 1): a SpeechToneHz tone at SpeechToneDBFS lasting
// SpeechPerChar per character, at SpeechRate.
func SpeechAudio(input string, speed float64) []int16 {
	if speed <= 0 {
		speed = 1
	}
	perChar := float64(media.SamplesFor(SpeechRate, SpeechPerChar))
	n := int(math.Round(float64(utf8.RuneCountInString(input)) * perChar / speed))
	amp := math.MaxInt16 * math.Pow(10, SpeechToneDBFS/20.0)
	w := 2 * math.Pi * SpeechToneHz / SpeechRate
	out := make([]int16, n)
	for i := range out {
		out[i] = int16(amp * math.Sin(w*float64(i)))
	}
	return out
}

// takeAudioFault pops the next fault queued in q, if any.
func (s *Server) takeAudioFault(q *[]AudioFault) (AudioFault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(*q) == 0 {
		return AudioFault{}, false
	}
	f := (*q)[0]
	*q = (*q)[1:]
	return f, true
}

// readAudioBody reads and records the request body, answering 413 past
// limit.
func (s *Server) readAudioBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		WriteError(w, http.StatusBadRequest, "invalid_request_error", "", "Could not read the request body.")
		return nil, false
	}
	s.record(Request{Method: r.Method, Path: r.URL.Path, Body: body})
	if int64(len(body)) > limit {
		WriteError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "", fmt.Sprintf("Maximum content size limit (%d) exceeded.", limit))
		return nil, false
	}
	return body, true
}

// audioWait blocks for d, or until the client goes away; it reports
// whether the response should go on.
func audioWait(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// audioHold blocks until ch is closed or the client goes away; it reports
// whether the response should go on.
func audioHold(r *http.Request, ch <-chan struct{}) bool {
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	case <-r.Context().Done():
		return false
	}
}

// applyAudioFault runs the part of f that comes before the answer. It
// reports whether the handler should go on to answer normally.
func applyAudioFault(w http.ResponseWriter, r *http.Request, f AudioFault, transcription bool) bool {
	if f.Arrived != nil {
		close(f.Arrived)
	}
	if !audioWait(r, f.Delay) {
		return false
	}
	if (transcription || f.HoldAfter == 0) && !audioHold(r, f.Hold) {
		return false
	}
	if f.Status != 0 {
		writeAudioFaultStatus(w, f)
		return false
	}
	if f.Abort && transcription {
		panic(http.ErrAbortHandler)
	}
	return true
}

func writeAudioFaultStatus(w http.ResponseWriter, f AudioFault) {
	typ, code, msg := "invalid_request_error", "", http.StatusText(f.Status)
	switch {
	case f.Status == http.StatusTooManyRequests:
		typ, code, msg = "requests", "rate_limit_exceeded", "Rate limit reached for requests. Please try again shortly."
	case f.Status >= 500:
		typ, code, msg = "server_error", "", "The server had an error while processing your request. Sorry about that!"
	case f.Status == http.StatusUnauthorized:
		code = "invalid_api_key"
	}
	if f.Message != "" {
		msg = f.Message
	}
	if f.RetryAfter > 0 {
		secs := int64(math.Ceil(f.RetryAfter.Seconds()))
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		w.Header().Set("Retry-After-Ms", strconv.FormatInt(f.RetryAfter.Milliseconds(), 10))
	}
	WriteError(w, f.Status, typ, code, msg)
}

func audioBadRequest(w http.ResponseWriter, code, format string, args ...any) {
	WriteError(w, http.StatusBadRequest, "invalid_request_error", code, fmt.Sprintf(format, args...))
}

// handleTranscription answers POST /v1/audio/transcriptions: a multipart
// form with a WAV file, as the real endpoint takes it.
func (s *Server) handleTranscription(w http.ResponseWriter, r *http.Request) {
	received := time.Now()
	latency := s.currentLatency()
	body, ok := s.readAudioBody(w, r, maxUpload)
	if !ok {
		return
	}
	fault, ok := s.takeAudioFault(&s.audio.sttFaults)
	if ok && !applyAudioFault(w, r, fault, true) {
		return
	}

	_, params, err := audioMimeType(r.Header.Get("Content-Type"))
	if err != nil || params["boundary"] == "" {
		audioBadRequest(w, "", "Expected a multipart/form-data body with a boundary, got Content-Type %q.", r.Header.Get("Content-Type"))
		return
	}
	form, err := multipart.NewReader(bytes.NewReader(body), params["boundary"]).ReadForm(maxUpload)
	if err != nil {
		audioBadRequest(w, "", "Could not parse multipart form: %v", err)
		return
	}
	defer form.RemoveAll()
	field := func(name string) string {
		if v := form.Value[name]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	t := Transcription{
		Model:          field("model"),
		Language:       field("language"),
		Prompt:         field("prompt"),
		ResponseFormat: field("response_format"),
	}
	for name := range form.Value {
		switch name {
		case "model", "language", "prompt", "response_format", "temperature", "chunking_strategy", "include[]", "stream", "timestamp_granularities[]":
		default:
			audioBadRequest(w, "unknown_parameter", "Unrecognized request argument supplied: %s", name)
			return
		}
	}
	if t.Model == "" {
		audioBadRequest(w, "missing_required_parameter", "you must provide a model parameter")
		return
	}
	gpt4o := strings.HasPrefix(t.Model, "gpt-4o")
	switch t.ResponseFormat {
	case "":
		t.ResponseFormat = "json"
	case "json", "text":
	case "verbose_json":
		if gpt4o {
			audioBadRequest(w, "unsupported_value", "response_format 'verbose_json' is not compatible with model '%s'. Use 'json' or 'text' instead.", t.Model)
			return
		}
	default:
		audioBadRequest(w, "unsupported_value", "The fake server answers response_format json, text or verbose_json, not %q.", t.ResponseFormat)
		return
	}
	if t.Language != "" && (len(t.Language) != 2 || strings.ToLower(t.Language) != t.Language) {
		audioBadRequest(w, "invalid_language_format", "Invalid language '%s'. Language parameter must be specified in ISO-639-1 format.", t.Language)
		return
	}
	files := form.File["file"]
	if len(files) != 1 {
		audioBadRequest(w, "missing_required_parameter", "you must provide exactly one file, got %d", len(files))
		return
	}
	t.Filename = files[0].Filename
	if !strings.HasSuffix(strings.ToLower(t.Filename), ".wav") {
		audioBadRequest(w, "invalid_value", "The fake server only decodes WAV files; the file name %q does not end in .wav, so the real API would guess another format.", t.Filename)
		return
	}
	file, err := files[0].Open()
	if err != nil {
		audioBadRequest(w, "", "Could not open the uploaded file: %v", err)
		return
	}
	t.Audio, t.SampleRate, err = media.ReadWAV(file)
	file.Close()
	if err != nil {
		audioBadRequest(w, "invalid_value", "Invalid file format: %v", err)
		return
	}
	if (media.Frame{Samples: t.Audio, SampleRate: t.SampleRate}).Duration() < minTranscribe {
		audioBadRequest(w, "audio_too_short", "Audio file is too short. Minimum audio length is 0.1 seconds.")
		return
	}

	s.mu.Lock()
	f := s.audio.transcriber
	s.audio.transcribed++
	n := s.audio.transcribed
	s.mu.Unlock()
	if f != nil {
		t.Text = f(t.Audio, t.SampleRate)
	} else {
		t.Text = fmt.Sprintf("utterance %d", n)
	}
	// A fault's delay came on top of the latency: it counts from then.
	if !audioWait(r, time.Until(received.Add(fault.Delay+latency.Transcription))) {
		return
	}
	t.Received, t.Answered = received, time.Now()
	s.mu.Lock()
	s.audio.transcriptions = append(s.audio.transcriptions, t)
	s.mu.Unlock()

	switch t.ResponseFormat {
	case "text":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, t.Text+"\n")
		return
	case "verbose_json":
		audioWriteJSON(w, map[string]any{
			"task":     "transcribe",
			"language": "english",
			"duration": (media.Frame{Samples: t.Audio, SampleRate: t.SampleRate}).Duration().Seconds(),
			"text":     t.Text,
			"segments": []any{},
		})
		return
	}
	audioWriteJSON(w, map[string]any{"text": t.Text})
}

func audioWriteJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// audioMimeType splits a Content-Type header; only multipart bodies are
// accepted by the transcription endpoint.
func audioMimeType(v string) (string, map[string]string, error) {
	typ, params, err := mime.ParseMediaType(v)
	if err != nil {
		return "", nil, err
	}
	if typ != "multipart/form-data" {
		return "", nil, fmt.Errorf("content type %q", typ)
	}
	return typ, params, nil
}

// speechVoices are the voices the real speech endpoint knows; a client
// sending another name gets the 400 it would get in production.
var speechVoices = []string{"alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova", "sage", "shimmer", "verse", "marin", "cedar"}

type speechRequest struct {
	Model          string   `json:"model"`
	Input          string   `json:"input"`
	Voice          string   `json:"voice"`
	ResponseFormat string   `json:"response_format"`
	Instructions   string   `json:"instructions"`
	Speed          *float64 `json:"speed"`
	StreamFormat   string   `json:"stream_format"`
}

// handleSpeech answers POST /v1/audio/speech with the tone of SpeechAudio,
// streamed in flushed pieces at the configured pace.
func (s *Server) handleSpeech(w http.ResponseWriter, r *http.Request) {
	received := time.Now()
	latency := s.currentLatency()
	body, ok := s.readAudioBody(w, r, 1<<20)
	if !ok {
		return
	}
	f, _ := s.takeAudioFault(&s.audio.ttsFaults)
	if !applyAudioFault(w, r, f, false) {
		return
	}

	var req speechRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var field string
		if _, after, ok := strings.Cut(err.Error(), "unknown field "); ok {
			field = strings.Trim(after, `"`)
			audioBadRequest(w, "unknown_parameter", "Unrecognized request argument supplied: %s", field)
			return
		}
		audioBadRequest(w, "", "We could not parse the JSON body of your request: %v", err)
		return
	}
	switch {
	case req.Model == "":
		audioBadRequest(w, "missing_required_parameter", "Missing required parameter: 'model'.")
		return
	case req.Input == "":
		audioBadRequest(w, "missing_required_parameter", "Missing required parameter: 'input'.")
		return
	case utf8.RuneCountInString(req.Input) > maxSpeechInput:
		audioBadRequest(w, "string_above_max_length", "Invalid 'input': string too long. Expected a string with maximum length %d, but got a string with length %d instead.", maxSpeechInput, utf8.RuneCountInString(req.Input))
		return
	case req.Voice == "":
		audioBadRequest(w, "missing_required_parameter", "Missing required parameter: 'voice'.")
		return
	case !slices.Contains(speechVoices, req.Voice):
		audioBadRequest(w, "invalid_value", "Invalid value: '%s'. Supported values are: %s.", req.Voice, strings.Join(speechVoices, ", "))
		return
	case req.ResponseFormat != "pcm" && req.ResponseFormat != "wav":
		// The real default is mp3, which a client streaming PCM must not
		// get by forgetting the field.
		audioBadRequest(w, "unsupported_value", "The fake server speaks response_format pcm or wav, not %q.", req.ResponseFormat)
		return
	case req.Speed != nil && (*req.Speed < 0.25 || *req.Speed > 4):
		audioBadRequest(w, "decimal_above_max_value", "Invalid 'speed': %v. Expected a value between 0.25 and 4.0.", *req.Speed)
		return
	case req.Instructions != "" && (req.Model == "tts-1" || req.Model == "tts-1-hd"):
		audioBadRequest(w, "unsupported_parameter", "Instructions are not supported with model '%s'.", req.Model)
		return
	case req.StreamFormat != "" && req.StreamFormat != "audio":
		audioBadRequest(w, "unsupported_value", "The fake server streams raw audio only, not stream_format %q.", req.StreamFormat)
		return
	}
	sp := Speech{Model: req.Model, Input: req.Input, Voice: req.Voice, ResponseFormat: req.ResponseFormat, Instructions: req.Instructions, Speed: 1, Received: received}
	if req.Speed != nil {
		sp.Speed = *req.Speed
	}
	s.mu.Lock()
	s.audio.speeches = append(s.audio.speeches, sp)
	index := len(s.audio.speeches) - 1
	pace := s.audio.pace
	s.mu.Unlock()
	// A fault's delay came on top of the latency: it counts from then.
	if !audioWait(r, time.Until(received.Add(f.Delay+latency.SpeechFirstAudio))) {
		return
	}

	samples := SpeechAudio(req.Input, sp.Speed)
	var out []byte
	if req.ResponseFormat == "wav" {
		// Streamed WAV as the real API sends it: sizes unknown, so set to
		// "until EOF".
		var hdr bytes.Buffer
		_ = media.WriteWAV(&hdr, nil, SpeechRate)
		out = hdr.Bytes()
		binary.LittleEndian.PutUint32(out[4:8], math.MaxUint32)
		binary.LittleEndian.PutUint32(out[40:44], math.MaxUint32)
		w.Header().Set("Content-Type", "audio/wav")
	} else {
		w.Header().Set("Content-Type", "audio/pcm")
	}
	out = slices.Grow(out, 2*len(samples))
	for _, v := range samples {
		out = binary.LittleEndian.AppendUint16(out, uint16(v))
	}
	w.WriteHeader(http.StatusOK)
	streamSpeech(w, r, out, pace, f, func() {
		s.mu.Lock()
		s.audio.speeches[index].FirstAudio = time.Now()
		s.mu.Unlock()
	})
}

// streamSpeech writes body in flushed pieces, applying the fault's
// mid-body hold and abort; onFirst is called once the first piece is out.
func streamSpeech(w http.ResponseWriter, r *http.Request, body []byte, pace SpeechPace, f AudioFault, onFirst func()) {
	rc := http.NewResponseController(w)
	piece := pace.PieceBytes
	if piece <= 0 {
		piece = DefaultSpeechPiece
	}
	holdAt, abortAt := -1, -1
	if f.Hold != nil && f.HoldAfter > 0 {
		holdAt = min(f.HoldAfter, len(body))
	}
	if f.Abort {
		abortAt = min(max(f.AbortAfter, 0), len(body))
	}
	start := time.Now()
	sent := 0
	for {
		// Pieces end at the fault's marks so they fall exactly where asked.
		end := min(sent+piece, len(body))
		if holdAt >= sent {
			end = min(end, holdAt)
		}
		if abortAt >= sent {
			end = min(end, abortAt)
		}
		if pace.Realtime > 0 {
			// The piece leaves when the audio before it would have played.
			due := start.Add(time.Duration(float64(sent/2) * float64(time.Second) / SpeechRate / pace.Realtime))
			if !audioWait(r, time.Until(due)) {
				return
			}
		}
		if _, err := w.Write(body[sent:end]); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		if sent == 0 && end > 0 {
			onFirst()
		}
		sent = end
		if sent == holdAt {
			holdAt = -1
			if !audioHold(r, f.Hold) {
				return
			}
		}
		if sent == abortAt {
			// Cuts the connection without the terminating chunk: the
			// client reads io.ErrUnexpectedEOF.
			panic(http.ErrAbortHandler)
		}
		if sent == len(body) {
			return
		}
	}
}

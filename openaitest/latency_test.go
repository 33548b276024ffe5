package openaitest_test

import (
	"bufio"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/openaitest"
	"github.com/holdline/holdline/scripted"
)

func TestChatTokens(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"Let me check that for you.", []string{"Let", " me", " check", " that", " for", " you."}},
		{"  Two  spaces\nand a line. ", []string{"  Two", "  spaces", "\nand", " a", " line.", " "}},
		{"", nil},
		{"   ", []string{"   "}},
	} {
		got := openaitest.ChatTokens(tc.text)
		if !slices.Equal(got, tc.want) {
			t.Errorf("ChatTokens(%q) = %q, want %q", tc.text, got, tc.want)
		}
		if strings.Join(got, "") != tc.text {
			t.Errorf("ChatTokens(%q) does not concatenate back to the text", tc.text)
		}
	}
}

// timedChunk is one streamed chunk and when it reached the client.
type timedChunk struct {
	at      time.Time
	content *string
	args    string // a tool-call delta's arguments
	call    bool   // a tool-call delta
}

// streamChat posts a streamed chat request and reads its chunks as they
// come, each with its arrival time; sent is when the request was sent.
func streamChat(t *testing.T, srv *openaitest.Server) (sent time.Time, chunks []timedChunk) {
	t.Helper()
	body := `{"model":"gpt-x","stream":true,"messages":[{"role":"user","content":"Book it"}]}`
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+"/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+openaitest.APIKey)
	sent = time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err == io.EOF {
			return sent, chunks
		}
		if err != nil {
			t.Fatal(err)
		}
		data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Role      string  `json:"role"`
					Content   *string `json:"content"`
					ToolCalls []struct {
						Function struct{ Arguments string } `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %s: %v", data, err)
		}
		d := c.Choices[0].Delta
		switch {
		case d.Role != "" || c.Choices[0].FinishReason != nil:
			// The opening and the closing chunk carry no token.
		case len(d.ToolCalls) > 0:
			chunks = append(chunks, timedChunk{at: time.Now(), call: true, args: d.ToolCalls[0].Function.Arguments})
		default:
			chunks = append(chunks, timedChunk{at: time.Now(), content: d.Content})
		}
	}
}

// The latency holds for every request, not only the next one: each
// answer's first token leaves ChatFirstToken after the request and each
// next one ChatTokenInterval later, the text cut into words and the
// tool call's arguments into pieces of a token. The brain streams all at
// once here, so only the server paces it.
func TestLatencyPacesEveryChatAnswer(t *testing.T) {
	const text = "Let me check that for you."
	args := `{"party":2,"time":"19:00"}`
	answer := scripted.Response{Text: text, TokensPerSecond: math.Inf(1), ToolCalls: []scripted.Call{{ID: "c1", Name: "check", Args: json.RawMessage(args)}}}
	lat := openaitest.Latency{ChatFirstToken: 150 * time.Millisecond, ChatTokenInterval: 30 * time.Millisecond}
	srv := openaitest.New(scripted.NewLLM(answer, answer, answer), openaitest.WithLatency(lat))
	defer srv.Close()
	// A fault's delay comes on top of the latency, for its request alone.
	srv.QueueChatFault(openaitest.ChatFault{FirstTokenDelay: 100 * time.Millisecond})

	wantTokens := openaitest.ChatTokens(text)
	var wantArgs []string
	for a := args; a != ""; a = a[min(len(a), openaitest.ChatArgsTokenBytes):] {
		wantArgs = append(wantArgs, a[:min(len(a), openaitest.ChatArgsTokenBytes)])
	}
	for i := range 3 {
		extra := time.Duration(0)
		if i == 0 {
			extra = 100 * time.Millisecond
		}
		sent, chunks := streamChat(t, srv)
		var gotText, gotArgs []string
		calls := 0
		for k, c := range chunks {
			// Token k leaves no earlier than its due time after the
			// request arrived, which is after the client sent it.
			due := extra + lat.ChatFirstToken + time.Duration(k)*lat.ChatTokenInterval
			if got := c.at.Sub(sent); got < due {
				t.Errorf("request %d, token %d came %v after the request; want at least %v", i, k, got, due)
			}
			switch {
			case c.call && c.args == "":
				calls++ // the delta naming the call
			case c.call:
				gotArgs = append(gotArgs, c.args)
			case c.content != nil:
				gotText = append(gotText, *c.content)
			}
		}
		if !slices.Equal(gotText, wantTokens) || calls != 1 || !slices.Equal(gotArgs, wantArgs) {
			t.Errorf("request %d: text %q, %d call heads, arguments %q; want %q, 1, %q", i, gotText, calls, gotArgs, wantTokens, wantArgs)
		}
	}

	reqs := srv.ChatRequests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests recorded, want 3", len(reqs))
	}
	for i, r := range reqs {
		if d := r.FirstToken.Sub(r.Received); r.Received.IsZero() || d < lat.ChatFirstToken {
			t.Errorf("request %d: first token %v after it was received (at %v); want at least %v", i, d, r.Received, lat.ChatFirstToken)
		}
		if r.Answer.Role != "assistant" || r.Answer.Content != text || len(r.Answer.ToolCalls) != 1 || r.Answer.ToolCalls[0].Function.Arguments != args {
			t.Errorf("request %d: answer recorded as %+v", i, r.Answer)
		}
	}
}

// A completion asked for without streaming comes whole, when its last
// token would have been sent.
func TestLatencyHoldsAnUnstreamedAnswerToItsLastToken(t *testing.T) {
	lat := openaitest.Latency{ChatFirstToken: 100 * time.Millisecond, ChatTokenInterval: 40 * time.Millisecond}
	srv := openaitest.New(scripted.NewLLM(scripted.Response{Text: "One two three four.", TokensPerSecond: math.Inf(1)}), openaitest.WithLatency(lat))
	defer srv.Close()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+"/chat/completions",
		strings.NewReader(`{"model":"gpt-x","messages":[{"role":"user","content":"Count"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+openaitest.APIKey)
	sent := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || !strings.Contains(string(b), "One two three four.") {
		t.Fatalf("status %d, %v: %s", resp.StatusCode, err, b)
	}
	// Four tokens: the last one 100 ms + 3 × 40 ms after the request.
	if d, want := time.Since(sent), 220*time.Millisecond; d < want {
		t.Errorf("the answer came after %v, want at least %v", d, want)
	}
}

// The audio endpoints answer every request after their latency: speech
// sends its first audio SpeechFirstAudio after the request, transcription
// answers Transcription after the upload, and both record when.
func TestLatencyDelaysEverySpeechAndTranscription(t *testing.T) {
	lat := openaitest.Latency{SpeechFirstAudio: 120 * time.Millisecond, Transcription: 90 * time.Millisecond}
	srv := openaitest.New(nil, openaitest.WithLatency(lat))
	defer srv.Close()
	audio := wav(t, make([]int16, 8000), 16000) // half a second
	for i := range 2 {
		start := time.Now()
		resp := speech(t, srv, map[string]any{"model": "gpt-4o-mini-tts", "input": "Hello there", "voice": "alloy", "response_format": "pcm"})
		first := make([]byte, 2)
		if _, err := io.ReadFull(resp.Body, first); err != nil || resp.StatusCode != 200 {
			t.Fatalf("speech %d: status %d, %v", i, resp.StatusCode, err)
		}
		if d := time.Since(start); d < lat.SpeechFirstAudio {
			t.Errorf("speech %d: first audio after %v, want at least %v", i, d, lat.SpeechFirstAudio)
		}
		io.Copy(io.Discard, resp.Body)

		body, ctype := upload(t, map[string]string{"model": "gpt-4o-mini-transcribe"}, "a.wav", audio)
		start = time.Now()
		resp = post(t, srv.URL()+"/audio/transcriptions", ctype, body)
		if _, err := io.ReadAll(resp.Body); err != nil || resp.StatusCode != 200 {
			t.Fatalf("transcription %d: status %d, %v", i, resp.StatusCode, err)
		}
		if d := time.Since(start); d < lat.Transcription {
			t.Errorf("transcription %d: answered after %v, want at least %v", i, d, lat.Transcription)
		}
	}
	for i, sp := range srv.Speeches() {
		if d := sp.FirstAudio.Sub(sp.Received); sp.Received.IsZero() || d < lat.SpeechFirstAudio {
			t.Errorf("speech %d recorded its first audio %v after it arrived; want at least %v", i, d, lat.SpeechFirstAudio)
		}
	}
	trs := srv.Transcriptions()
	if len(trs) != 2 {
		t.Fatalf("%d transcriptions recorded, want 2", len(trs))
	}
	for i, tr := range trs {
		if d := tr.Answered.Sub(tr.Received); tr.Received.IsZero() || d < lat.Transcription {
			t.Errorf("transcription %d recorded as answered %v after it arrived; want at least %v", i, d, lat.Transcription)
		}
		if got := (media.Frame{Samples: tr.Audio, SampleRate: tr.SampleRate}).Duration(); got != 500*time.Millisecond {
			t.Errorf("transcription %d decoded %v of audio", i, got)
		}
	}
}

// SetLatency changes the latency for the requests that come after it.
func TestSetLatencyTakesTheNextRequests(t *testing.T) {
	srv := openaitest.New(nil)
	defer srv.Close()
	audio := wav(t, make([]int16, 4000), 16000)
	transcribe := func() time.Duration {
		body, ctype := upload(t, map[string]string{"model": "whisper-1"}, "a.wav", audio)
		start := time.Now()
		resp := post(t, srv.URL()+"/audio/transcriptions", ctype, body)
		io.Copy(io.Discard, resp.Body)
		return time.Since(start)
	}
	transcribe()
	srv.SetLatency(openaitest.Latency{Transcription: 150 * time.Millisecond})
	if d := transcribe(); d < 150*time.Millisecond {
		t.Errorf("after SetLatency, a transcription took %v; want at least 150ms", d)
	}
	if trs := srv.Transcriptions(); len(trs) != 2 || trs[1].Answered.Sub(trs[1].Received) < 150*time.Millisecond {
		t.Errorf("%d transcriptions recorded; want 2, the second answered at least 150ms after it arrived", len(trs))
	}
}

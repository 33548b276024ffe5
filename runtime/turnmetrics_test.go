package runtime

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/vad"
)

// frame is the audio frame: the resolution of everything the line does.
const frame = 20 * time.Millisecond

func near(got, want time.Duration) bool { return got >= want-frame && got <= want+frame }

// A spoken turn answered by providers with known delays gets a
// turn_metrics event whose stages are those delays, within a frame: the
// recogniser's, the endpointing silence, the model's first token, the
// voice's first audio, the line's frame clock; Holdline's own overhead is
// nothing in a bubble where only the providers take time.
func TestTurnMetricsGiveEachStageItsTime(t *testing.T) {
	const (
		sttLatency = 150 * time.Millisecond
		endpoint   = 500 * time.Millisecond
		ttfb       = 300 * time.Millisecond
		voiceTTFB  = 120 * time.Millisecond
	)
	synctest.Test(t, func(t *testing.T) {
		rec := scripted.NewSTT(scripted.WithLatency(sttLatency))
		rec.Say("Book a table for two.")
		h := start(t, setup{
			stt:     rec,
			opts:    []Option{WithEndpointing(endpoint), WithSpeculation(false)},
			ttsOpts: []scripted.TTSOption{scripted.WithTTFB(voiceTTFB)},
			responses: []scripted.Response{{TTFB: ttfb, Text: "Sure, for what time?",
				Usage: &llm.Usage{InputTokens: 42, OutputTokens: 6}}},
		})
		h.hush(200 * time.Millisecond)
		h.speak(600 * time.Millisecond)
		spokeUntil := time.Now()
		h.hush(3 * time.Second)
		e := h.waitFor(events.TurnMetrics, nil, 5*time.Second)
		m := e.Turn
		if m == nil {
			t.Fatal("turn_metrics without its breakdown")
		}
		started, _ := h.find(events.SessionStarted, nil)
		// The caller's voice ended when the last loud frame had played.
		if want := spokeUntil.Sub(started.Time) - started.At; !near(m.SpeechEnd, want) {
			t.Errorf("speech end %v, want %v (when the caller's loud audio ended) within a frame", m.SpeechEnd, want)
		}
		checks := []struct {
			name      string
			got, want time.Duration
		}{
			// The detector calls the end after its silence; the recogniser
			// finalises then, and the endpointing silence starts.
			{"final transcript after the speech end", m.Transcript - m.SpeechEnd, vad.DefaultMinSilence + sttLatency},
			{"endpoint after the speech end", m.Endpoint - m.SpeechEnd, vad.DefaultMinSilence + endpoint},
			{"request after the endpoint", m.Request - m.Endpoint, 0},
			{"first token after the request", m.FirstToken - m.Request, ttfb},
			{"voice's first audio after the first phrase", m.VoiceFirstAudio - m.FirstPhrase, voiceTTFB},
			{"queued after the voice's first audio", m.Queued - m.VoiceFirstAudio, 0},
			{"played after queued", m.FirstPlayed - m.Queued, frame / 2},
			{"overhead", m.Overhead, 0},
		}
		for _, c := range checks {
			if !near(c.got, c.want) {
				t.Errorf("%s: %v, want %v within a frame", c.name, c.got, c.want)
			}
		}
		if m.ModelDone <= m.FirstToken || m.SynthDone < m.VoiceFirstAudio || m.Interrupted {
			t.Errorf("model done %v (first token %v), synthesis done %v (first audio %v), interrupted %v",
				m.ModelDone, m.FirstToken, m.SynthDone, m.VoiceFirstAudio, m.Interrupted)
		}
		if m.FirstPhrase < m.FirstToken {
			t.Errorf("the first phrase went to the voice (%v) before the model's first token (%v)", m.FirstPhrase, m.FirstToken)
		}
		if m.TokensIn != 42 || m.TokensOut != 6 {
			t.Errorf("tokens %d in, %d out; want the model's 42 and 6", m.TokensIn, m.TokensOut)
		}
		if m.Agent != "test" || m.Model != "*scripted.LLM" || m.Voice != "*scripted.TTS" {
			t.Errorf("agent %q model %q voice %q", m.Agent, m.Model, m.Voice)
		}
		played, _ := h.find(events.PlayoutStarted, nil)
		if m.FirstPlayed != played.At {
			t.Errorf("first played at %v, the playout_started event at %v", m.FirstPlayed, played.At)
		}
		if settled, _ := h.find(events.TurnSettled, nil); settled.Seq != e.Seq+1 {
			t.Errorf("turn_metrics is event %d, the turn settled at %d: want it just before", e.Seq, settled.Seq)
		}
	})
}

// A turn that is not an answer to the caller (the agent's greeting) has
// no caller stages, and its voice-to-voice is not made up.
func TestTurnMetricsOfAGreetingHaveNoCallerStages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, setup{responses: []scripted.Response{{TTFB: 100 * time.Millisecond, Text: "Hello, Holdline Bistro."}}})
		if err := h.s.GenerateReply(context.Background(), ""); err != nil {
			t.Fatal(err)
		}
		m := h.waitFor(events.TurnMetrics, nil, 5*time.Second).Turn
		if m.SpeechEnd != 0 || m.Transcript != 0 || m.Endpoint != 0 {
			t.Errorf("a greeting with caller stages: %+v", *m)
		}
		if m.Request == 0 || !near(m.FirstToken-m.Request, 100*time.Millisecond) || m.FirstPlayed == 0 {
			t.Errorf("greeting stages %+v", *m)
		}
	})
}

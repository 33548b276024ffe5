package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/stt"
	"github.com/holdline/holdline/tools"
)

// A model that fails before its first token hands the turn to the backup
// model, and an event says so; the caller hears only the backup's answer.
func TestBackupModelTakesTheTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		backup := scripted.NewLLM(scripted.Response{Text: "Hello from the backup."})
		h := start(t, setup{
			responses: []scripted.Response{{Err: errors.New("upstream 503")}},
			agent:     func(a *Agent) { a.BackupModel = backup },
		})
		if err := h.s.Inject(context.Background(), "Hi"); err != nil {
			t.Fatal(err)
		}
		fo := h.waitFor(events.ProviderFailover, nil, time.Second)
		if fo.Provider != "llm" || !strings.Contains(fo.Error, "upstream 503") {
			t.Errorf("failover event = %s %q; want llm naming the error", fo.Provider, fo.Error)
		}
		done := h.waitFor(events.PlayoutDone, nil, 5*time.Second)
		if done.Text != "Hello from the backup." {
			t.Errorf("played %q; want the backup's answer", done.Text)
		}
		if _, failed := h.find(events.ProviderError, nil); failed {
			t.Errorf("a provider_error was reported though the backup answered:\n%s", h.timeline())
		}
	})
}

// A model that fails after it has started speaking is not retried: a second
// answer would repeat or contradict what the caller already heard.
func TestModelFailingMidAnswerIsNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		backup := scripted.NewLLM(scripted.Response{Text: "Backup speaking."})
		h := start(t, setup{
			responses: []scripted.Response{{Text: "Hello there my friend.", Err: errors.New("upstream 500"), ErrAfter: 2}},
			agent:     func(a *Agent) { a.BackupModel = backup },
		})
		if err := h.s.Inject(context.Background(), "Hi"); err != nil {
			t.Fatal(err)
		}
		done := h.waitFor(events.PlayoutDone, nil, 5*time.Second)
		if done.Text != "Hello there" {
			t.Errorf("played %q; want only what the failing model said", done.Text)
		}
		if _, ok := h.find(events.ProviderFailover, nil); ok {
			t.Error("failed over after the model had started speaking")
		}
		h.waitFor(events.ProviderError, nil, time.Second)
	})
}

// A synthesiser that fails on a phrase it had not started hands the phrase
// to the backup, which speaks all of it.
func TestBackupSynthesizerSpeaksThePhrase(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		backup, err := scripted.NewTTS()
		if err != nil {
			t.Fatal(err)
		}
		h := start(t, setup{
			responses: []scripted.Response{{Text: "One two three. Four five six."}},
			ttsOpts:   []scripted.TTSOption{scripted.WithTTSFailure(errors.New("tts 500"), 0)},
			agent:     func(a *Agent) { a.BackupTTS = backup },
		})
		if err := h.s.Inject(context.Background(), "Count"); err != nil {
			t.Fatal(err)
		}
		done := h.waitFor(events.PlayoutDone, nil, 10*time.Second)
		if done.Text != "One two three. Four five six." {
			t.Errorf("played %q; want every word, from the backup", done.Text)
		}
		fo := h.waitFor(events.ProviderFailover, nil, time.Second)
		if fo.Provider != "tts" {
			t.Errorf("failover provider = %q; want tts", fo.Provider)
		}
		if got := backup.Texts(); len(got) != 2 {
			t.Errorf("backup spoke %q; want both phrases", got)
		}
	})
}

// A recogniser whose stream breaks is replaced by the backup, whose
// transcripts become the caller's turns.
func TestBackupRecognizerTakesOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		broken := scripted.NewSTT(scripted.WithSTTFailure(errors.New("stt socket closed")))
		broken.Say("lost words")
		backup := scripted.NewSTT()
		backup.Say("Book a table")
		h := start(t, setup{
			responses: []scripted.Response{{Text: "Sure."}},
			stt:       broken,
			agent:     func(a *Agent) { a.BackupSTT = backup },
		})
		h.speak(400 * time.Millisecond)
		h.hush(time.Second)
		fo := h.waitFor(events.ProviderFailover, nil, 2*time.Second)
		if fo.Provider != "stt" || !strings.Contains(fo.Error, "stt socket closed") {
			t.Errorf("failover = %s %q", fo.Provider, fo.Error)
		}
		h.speak(400 * time.Millisecond)
		h.hush(time.Second)
		turn := h.waitFor(events.UserTurn, nil, 2*time.Second)
		if turn.Text != "Book a table" {
			t.Errorf("user turn %q; want the backup's transcript", turn.Text)
		}
	})
}

// voicedModel is a speech-to-speech model: it answers with its own audio
// (at 24 kHz, in 40 ms pieces) and a transcript that runs ahead of it.
type voicedModel struct {
	text  string
	audio time.Duration

	mu   sync.Mutex
	reqs []llm.Request
}

func (m *voicedModel) Voiced() bool { return true }

func (m *voicedModel) Stream(ctx context.Context, req llm.Request) (llm.Stream, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	var chunks []llm.Chunk
	for _, w := range strings.SplitAfter(m.text, " ") {
		chunks = append(chunks, llm.Chunk{Transcript: w})
	}
	piece := media.SamplesFor(24000, 40*time.Millisecond)
	for at := time.Duration(0); at < m.audio; at += 40 * time.Millisecond {
		s := make([]int16, piece)
		for i := range s {
			s[i] = 3000
		}
		chunks = append(chunks, llm.Chunk{Audio: media.Frame{Samples: s, SampleRate: 24000}})
	}
	return &voicedStream{ctx: ctx, chunks: chunks}, nil
}

type voicedStream struct {
	ctx    context.Context
	chunks []llm.Chunk
}

func (s *voicedStream) Recv() (llm.Chunk, error) {
	if err := s.ctx.Err(); err != nil {
		return llm.Chunk{}, err
	}
	if len(s.chunks) == 0 {
		return llm.Chunk{}, io.EOF
	}
	// Audio comes faster than real time, as providers send it.
	time.Sleep(10 * time.Millisecond)
	c := s.chunks[0]
	s.chunks = s.chunks[1:]
	return c, nil
}

func (s *voicedStream) Close() error { return nil }

// A speaking model's audio is played as it is, resampled to the output;
// its transcript is what the context says was said.
func TestVoicedModelPlaysItsOwnAudio(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &voicedModel{text: "Your table for two is booked.", audio: 2 * time.Second}
		h := start(t, setup{agent: func(a *Agent) { a.Model, a.TTS = m, nil }})
		if err := h.s.Inject(context.Background(), "Book it"); err != nil {
			t.Fatal(err)
		}
		done := h.waitFor(events.PlayoutDone, nil, 5*time.Second)
		if done.Text != m.text {
			t.Errorf("played %q; want the model's transcript", done.Text)
		}
		if done.Played != 2*time.Second {
			t.Errorf("played %v of audio; want the model's 2s", done.Played)
		}
		if got := h.out.audible(); got < 1900*time.Millisecond {
			t.Errorf("output carried %v of audible audio; want about 2s", got)
		}
	})
}

// Cut into a speaking model's answer, the context keeps only the words
// heard by then and records how much audio was played, for a model that
// keeps its own copy of the conversation to truncate it.
func TestVoicedModelInterruptedKeepsWhatWasPlayed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &voicedModel{text: "one two three four five six seven eight nine ten", audio: 4 * time.Second}
		h := start(t, setup{agent: func(a *Agent) { a.Model, a.TTS = m, nil }})
		if err := h.s.Inject(context.Background(), "Count"); err != nil {
			t.Fatal(err)
		}
		h.waitFor(events.TurnStarted, nil, time.Second)
		time.Sleep(1500 * time.Millisecond)
		if err := h.s.Inject(context.Background(), "Stop"); err != nil {
			t.Fatal(err)
		}
		cut := h.waitFor(events.PlayoutTruncate, nil, time.Second)
		words := strings.Fields(cut.Text)
		if len(words) == 0 || len(words) > 6 || !strings.HasPrefix(m.text, cut.Text) {
			t.Errorf("after %v of audio the context says %q; want a prefix of the answer, no more than was heard", cut.Played, cut.Text)
		}
		var item llm.Item
		for _, it := range h.context().Items {
			if it.Role == llm.RoleAssistant {
				item = it
			}
		}
		if !item.Interrupted || item.Played != cut.Played || item.Played < time.Second || item.Played > 2*time.Second {
			t.Errorf("assistant item = %+v; want interrupted with Played = %v", item, cut.Played)
		}
	})
}

var _ stt.Recognizer = (*scripted.STT)(nil)

type weatherArgs struct {
	City string `json:"city"`
}

// weatherCall is the booking-free example of a turn with a read tool: a
// preamble while the lookup runs, then the answer as its follow-up.
func weatherCall(ttsOpts ...scripted.TTSOption) setup {
	weather := tools.MustNew("get_weather", "Weather for a city.", func(ctx context.Context, a weatherArgs) (string, error) {
		return "sunny in " + a.City, nil
	}, tools.WithEffect(tools.Read))
	return setup{
		tools: []*tools.Tool{weather},
		responses: []scripted.Response{
			{Text: "Let me check.", ToolCalls: []scripted.Call{{ID: "w1", Name: "get_weather", Args: weatherArgs{City: "Lisbon"}}}},
			{Text: "It is sunny in Lisbon today."},
			{Text: "I said it is sunny in Lisbon today."},
		},
		ttsOpts: ttsOpts,
	}
}

// A voice that fails once on the answer after a tool result is asked again:
// the caller hears the whole answer, a moment late, and nothing is lost.
func TestVoiceFailingOnceOnTheAnswerIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Stream 1 is the preamble, 2 the answer's first try.
		h := start(t, weatherCall(scripted.WithTTSFailure(errors.New("tts 503"), 0), scripted.WithTTSFailingStreams(2)))
		if err := h.s.Inject(context.Background(), "Weather in Lisbon?"); err != nil {
			t.Fatal(err)
		}
		h.waitFor(events.PlayoutDone, func(e events.Event) bool { return strings.Contains(e.Text, "sunny") }, 10*time.Second)
		h.waitFor(events.Idle, nil, 5*time.Second)
		if got := h.voice.Texts(); !slices.Equal(got, []string{"Let me check.", "It is sunny in Lisbon today.", "It is sunny in Lisbon today."}) {
			t.Errorf("the voice was asked for %q; want the preamble, then the answer twice (a failure and its retry)", got)
		}
		if e, failed := h.find(events.ProviderError, nil); failed {
			t.Errorf("provider_error %q though the retry spoke the answer", e.Error)
		}
		for _, it := range h.context().Items {
			if it.Role == llm.RoleSystem {
				t.Errorf("context has a system note %q though the answer was heard", it.Text)
			}
		}
	})
}

// When no voice can speak the answer, the caller is not left guessing: the
// context keeps what was heard and a note of what was not, the event names
// the lost words, and the next request carries the note so the model can
// say it again.
func TestAnswerNoVoiceCanSpeakIsNotedForTheModel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, weatherCall(scripted.WithTTSFailure(errors.New("tts 503"), 0), scripted.WithTTSFailingStreams(2, 3)))
		if err := h.s.Inject(context.Background(), "Weather in Lisbon?"); err != nil {
			t.Fatal(err)
		}
		lost := h.waitFor(events.ProviderError, nil, 10*time.Second)
		if lost.Provider != "tts" || lost.Text != "It is sunny in Lisbon today." || !strings.Contains(lost.Error, "tts 503") {
			t.Errorf("provider_error = %s %q %q; want tts naming the lost answer and the error", lost.Provider, lost.Text, lost.Error)
		}
		h.waitFor(events.Idle, nil, 5*time.Second)
		var note string
		for _, it := range h.context().Items {
			if it.Role == llm.RoleAssistant && strings.Contains(it.Text, "sunny") {
				t.Errorf("context says the agent said %q, which the caller never heard", it.Text)
			}
			if it.Role == llm.RoleSystem {
				note = it.Text
			}
		}
		if got, ok := engine.IsUndeliveredNote(note); !ok || got != "It is sunny in Lisbon today." {
			t.Fatalf("context's system note = %q; want the not-delivered note naming the answer", note)
		}
		if err := h.s.Inject(context.Background(), "Hello?"); err != nil {
			t.Fatal(err)
		}
		h.waitFor(events.PlayoutDone, func(e events.Event) bool { return strings.HasPrefix(e.Text, "I said") }, 10*time.Second)
		reqs := h.model.Requests()
		last := reqs[len(reqs)-1].Context.Items
		found := false
		for _, it := range last {
			found = found || it.Role == llm.RoleSystem && it.Text == note
		}
		if !found {
			t.Errorf("the request after the failure does not carry the note:\n%v", last)
		}
	})
}

// A backup voice is tried after the retry on the agent's own voice, and
// keeps speaking the rest of the answer.
func TestBackupVoiceAfterTheRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		backup, err := scripted.NewTTS()
		if err != nil {
			t.Fatal(err)
		}
		su := weatherCall(scripted.WithTTSFailure(errors.New("tts 503"), 0), scripted.WithTTSFailingStreams(2, 3))
		su.agent = func(a *Agent) { a.BackupTTS = backup }
		h := start(t, su)
		if err := h.s.Inject(context.Background(), "Weather in Lisbon?"); err != nil {
			t.Fatal(err)
		}
		h.waitFor(events.PlayoutDone, func(e events.Event) bool { return strings.Contains(e.Text, "sunny") }, 10*time.Second)
		if got := backup.Texts(); !slices.Equal(got, []string{"It is sunny in Lisbon today."}) {
			t.Errorf("backup spoke %q; want the answer", got)
		}
		h.waitFor(events.ProviderFailover, nil, time.Second)
	})
}

type permanentErr struct{}

func (permanentErr) Error() string   { return "HTTP 404: no speech endpoint" }
func (permanentErr) Temporary() bool { return false }

// A voice whose error says it is not temporary (a server without the
// speech endpoint) is not asked again: the backup speaks at once.
func TestPermanentVoiceErrorGoesStraightToTheBackup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		backup, err := scripted.NewTTS()
		if err != nil {
			t.Fatal(err)
		}
		su := weatherCall(scripted.WithTTSFailure(fmt.Errorf("speech: %w", permanentErr{}), 0), scripted.WithTTSFailingStreams(2))
		su.agent = func(a *Agent) { a.BackupTTS = backup }
		h := start(t, su)
		if err := h.s.Inject(context.Background(), "Weather in Lisbon?"); err != nil {
			t.Fatal(err)
		}
		h.waitFor(events.PlayoutDone, func(e events.Event) bool { return strings.Contains(e.Text, "sunny") }, 10*time.Second)
		if got := h.voice.Texts(); !slices.Equal(got, []string{"Let me check.", "It is sunny in Lisbon today."}) {
			t.Errorf("the agent's voice was asked for %q; want the answer once, not retried", got)
		}
		if got := backup.Texts(); !slices.Equal(got, []string{"It is sunny in Lisbon today."}) {
			t.Errorf("backup spoke %q; want the answer", got)
		}
	})
}

package sip_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/sip"
	"github.com/holdline/holdline/stt/pocketsphinx"
	"github.com/holdline/holdline/tts"
	"github.com/holdline/holdline/vad/corpus"
)

// clipVoice speaks the corpus's agent sentences with the corpus's own
// audio of them, so that the call carries exactly the speech the corpus
// measures.
type clipVoice map[string][]int16

func (v clipVoice) Synthesize(ctx context.Context, text string) (tts.Stream, error) {
	pcm, ok := v[text]
	if !ok {
		return nil, fmt.Errorf("no corpus audio for %q", text)
	}
	return &clipStream{ctx: ctx, pcm: pcm}, nil
}

type clipStream struct {
	ctx context.Context
	pcm []int16
}

func (s *clipStream) Recv() (tts.Chunk, error) {
	if err := s.ctx.Err(); err != nil {
		return tts.Chunk{}, err
	}
	if len(s.pcm) == 0 {
		return tts.Chunk{}, io.EOF
	}
	n := min(len(s.pcm), media.SamplesFor(media.Rate8k, 20*time.Millisecond))
	c := tts.Chunk{Audio: media.Frame{Samples: s.pcm[:n], SampleRate: media.Rate8k}}
	s.pcm = s.pcm[n:]
	return c, nil
}

func (s *clipStream) Close() error { return nil }

// clipOutcome is what one clip did on a call.
type clipOutcome struct {
	clip        corpus.Clip
	greetingCut bool // the first turn was cut (by its echo): the clip never played
	interrupted bool
	latency     time.Duration // from the caller's onset to the cut turn
	paused      time.Duration // from the onset to the first pause; -1 never
}

// The barge-in corpus replayed through phone calls on a line that loops
// the agent back 120 ms later at -6 dB (HOLDLINE_SIP_CORPUS=1: every
// sentence, interruption and backchannel once, 25 calls, about 3 minutes;
// =all: the whole corpus, 144 calls). Each clip is a call: the agent says
// the clip's sentence (its audio), the line echoes it, and the caller's
// side adds the clip's interruption or backchannel where the clip has it,
// and its background noise. The recogniser is pocketsphinx at 8 kHz, as a
// user running on this machine's engines has it. Echo-only and
// backchannel calls must not interrupt the agent; barge-ins must.
func TestBargeInCorpusOverPhoneCalls(t *testing.T) {
	mode := os.Getenv("HOLDLINE_SIP_CORPUS")
	if mode == "" {
		t.Skip("HOLDLINE_SIP_CORPUS=1 (or =all) replays the barge-in corpus through calls")
	}
	ctx := context.Background()
	clips, err := corpus.Generate(ctx, corpus.Options{Rate: media.Rate8k})
	if err != nil {
		t.Skipf("corpus: %v", err)
	}
	// The agent's sentences, as the clips have them (their speech and
	// 20 ms either side), and every phrase for the recogniser.
	voices := map[string][]int16{}
	var phrases []string
	var picked []corpus.Clip
	seen := map[string]bool{}
	for _, c := range clips {
		if _, ok := voices[c.AgentText]; !ok && c.Kind == corpus.Echo {
			per := func(d time.Duration) int { return int(d.Seconds() * float64(c.Rate)) }
			lead := 20 * time.Millisecond
			voices[c.AgentText] = c.Far[per(max(0, c.AgentSpan[0]-lead)):min(len(c.Far), per(c.AgentSpan[1]+lead))]
		}
		for _, p := range []string{c.AgentText, c.UserText} {
			if p != "" && !slices.Contains(phrases, p) {
				phrases = append(phrases, p)
			}
		}
		switch {
		case c.Kind == corpus.Echo:
			if c.Delay == 120*time.Millisecond && c.GainDB == -6 {
				picked = append(picked, c)
			}
		case mode == "all" || !seen[c.UserText]:
			seen[c.UserText] = true
			picked = append(picked, c)
		}
	}
	var mu sync.Mutex
	var outcomes []clipOutcome
	t.Run("calls", func(t *testing.T) {
		for _, c := range picked {
			t.Run(c.Name, func(t *testing.T) {
				t.Parallel()
				o := replayClip(t, c, voices, phrases)
				mu.Lock()
				outcomes = append(outcomes, o)
				mu.Unlock()
			})
		}
	})
	reportCorpus(t, outcomes)
}

// replayClip makes one clip a call. The clip is the agent's second turn:
// a first sentence (another of the corpus's) plays over the echo as a
// greeting would, so that the clip meets the echo canceller mid-call, as
// a barge-in usually does; the corpus evaluation's "full" mode.
func replayClip(t *testing.T, c corpus.Clip, voices map[string][]int16, phrases []string) clipOutcome {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	greeting := ""
	for text := range voices {
		if text != c.AgentText && (greeting == "" || text < greeting) {
			greeting = text
		}
	}
	var sess atomic.Pointer[runtime.Session]
	line, rec := echoCallWith(t, ctx, 120*time.Millisecond, -6, func(rec *recorder) sip.AgentFunc {
		return func(context.Context) (*runtime.Agent, func(), error) {
			ears, err := pocketsphinx.New(pocketsphinx.WithPhrases(phrases...))
			if err != nil {
				return nil, nil, err
			}
			var turns atomic.Int32
			model := scripted.NewLLMFunc(func(llm.Request) scripted.Response {
				if turns.Add(1) == 1 {
					return scripted.Response{TTFB: 50 * time.Millisecond, Text: greeting}
				}
				// The pause before the clip lets the line tell its start.
				return scripted.Response{TTFB: 300 * time.Millisecond, Text: c.AgentText}
			})
			return &runtime.Agent{
				Name: "phone", Model: model, TTS: clipVoice(voices), STT: ears,
				OnEnter: func(ctx context.Context, s *runtime.Session) error {
					rec.attach(s)
					sess.Store(s)
					return s.GenerateReply(ctx, "")
				},
			}, nil, nil
		}
	})
	if c.Noise {
		line.mu.Lock()
		line.noise = c.Background
		line.mu.Unlock()
	}
	o := clipOutcome{clip: c, latency: -1, paused: -1}
	for !rec.find(events.PlayoutDone, greeting) {
		if rec.find(events.TurnInterrupted, "") || ctx.Err() != nil {
			o.greetingCut = true
			t.Logf("the greeting was cut: %v", rec.kinds())
			return o
		}
		time.Sleep(20 * time.Millisecond)
	}
	before := len(rec.kinds())
	lead := 20 * time.Millisecond
	from := int(max(0, c.AgentSpan[0]-lead).Seconds() * float64(c.Rate))
	if c.User != nil {
		line.sayWithAgentsNext(c.User[from:])
	} else {
		line.sayWithAgentsNext(nil)
	}
	if err := sess.Load().GenerateReply(ctx, ""); err != nil {
		t.Fatal(err)
	}
	for line.cueStart().IsZero() && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	onset := line.cueStart().Add(c.UserOnset - time.Duration(from)*time.Second/time.Duration(c.Rate))
	cut := func() (events.Event, bool) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for _, e := range rec.evs[before:] {
			if e.Kind == events.TurnInterrupted {
				return e, true
			}
		}
		return events.Event{}, false
	}
	for ctx.Err() == nil {
		if _, ok := cut(); ok || rec.find(events.PlayoutDone, c.AgentText) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, ok := cut(); c.Kind != corpus.Echo && !ok {
		// A backchannel may pause the agent and be judged after the
		// agent has finished: give the judgement time to come.
		time.Sleep(time.Until(onset.Add(c.UserEnd - c.UserOnset + 1500*time.Millisecond)))
	}
	if e, ok := cut(); ok {
		o.interrupted = true
		if c.Kind != corpus.Echo {
			o.latency = e.Time.Sub(onset)
		}
	}
	if o.interrupted != (c.Kind == corpus.BargeIn) {
		t.Logf("after the greeting: %v", rec.kinds()[before:])
	}
	rec.mu.Lock()
	for _, e := range rec.evs[before:] {
		if c.Kind != corpus.Echo && e.Kind == events.BargeInSuspected && e.Time.After(onset) {
			o.paused = e.Time.Sub(onset)
			break
		}
	}
	rec.mu.Unlock()
	return o
}

func reportCorpus(t *testing.T, outcomes []clipOutcome) {
	type tally struct {
		n, interrupted  int
		latency, paused []time.Duration
	}
	by := map[corpus.Kind]*tally{}
	var misses, falses, greetings []string
	for _, o := range outcomes {
		if o.greetingCut {
			greetings = append(greetings, o.clip.Name)
			continue
		}
		tl := by[o.clip.Kind]
		if tl == nil {
			tl = &tally{}
			by[o.clip.Kind] = tl
		}
		tl.n++
		if o.interrupted {
			tl.interrupted++
			if o.latency >= 0 {
				tl.latency = append(tl.latency, o.latency)
			}
		}
		if o.paused >= 0 {
			tl.paused = append(tl.paused, o.paused)
		}
		switch {
		case o.clip.Kind == corpus.BargeIn && !o.interrupted:
			misses = append(misses, o.clip.Name)
		case o.clip.Kind != corpus.BargeIn && o.interrupted:
			falses = append(falses, o.clip.Name)
		}
	}
	pct := func(d []time.Duration, q float64) string {
		if len(d) == 0 {
			return "-"
		}
		slices.Sort(d)
		return d[min(len(d)-1, int(q*float64(len(d))))].Round(time.Millisecond).String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| clips | calls | agent interrupted | caller's onset to pause, p50 / p95 | onset to cut turn, p50 / p95 |\n|---|---|---|---|---|\n")
	for _, k := range []corpus.Kind{corpus.Echo, corpus.BargeIn, corpus.Backchannel} {
		if tl := by[k]; tl != nil {
			fmt.Fprintf(&b, "| %s | %d | %d | %s / %s | %s / %s |\n", k, tl.n, tl.interrupted,
				pct(tl.paused, .5), pct(tl.paused, .95), pct(tl.latency, .5), pct(tl.latency, .95))
		}
	}
	t.Logf("%s%d of %d greetings (the first turn, echo only) interrupted themselves", b.String(), len(greetings), len(outcomes))
	if len(greetings) > 0 {
		t.Errorf("greetings cut by their own echo: %v", greetings)
	}
	if len(misses) > 0 {
		t.Errorf("barge-ins that did not interrupt: %v", misses)
	}
	if len(falses) > 0 {
		t.Errorf("echo or backchannels that interrupted the agent: %v", falses)
	}
}

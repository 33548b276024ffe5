package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/media/aec"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/stt"
	"github.com/holdline/holdline/vad"
)

// echoPather is an engine.EchoCanceller that measures the line's echo path
// (media/aec's Canceller does).
type echoPather interface{ EchoPath() aec.EchoPath }

// echoJudge is an engine.EchoCanceller that can tell that a frame holds nothing
// but the echo (media/aec's Canceller can): louder than the canceller's
// residual, but not louder than the line's echo of what was played.
type echoJudge interface{ EchoOnly() bool }

// audioInput is the caller-audio edge: echo cancellation, voice activity,
// the barge-in arbiter and recognition. It runs on the goroutine that calls
// PushAudio, so the frame path needs no copies and no channel hops; only
// decisions reach the conductor.
type audioInput struct {
	s   *Session
	det vad.Detector
	cfg engine.InputConfig
	aec engine.EchoCanceller
	tap *echoTap

	frame aecFrame

	// agentNow is what the agent's output was doing in the last frame
	// judged (a vad.Agent), for the transcript relay.
	agentNow atomic.Uint32
	// endPending: the transcript relay ruled a suspicion out; the frame
	// path ends the utterance (Stream.EndOfSpeech belongs to the writer).
	endPending atomic.Bool
	// writeFailing: the recogniser refused the last frame; reported once
	// per run of refusals.
	writeFailing atomic.Bool
	// unheard counts the caller's frames the recogniser refused (it fell
	// behind, or failed): words it never got.
	unheard atomic.Uint64
	// path is the echo path last reported (frame path only).
	path aec.EchoPath

	// mu guards the judge and the recogniser stream: the frame path and
	// the transcript relay both use them.
	mu     sync.Mutex
	judged *engine.InputJudge
	stream stt.Stream
}

// aecFrame gathers caller audio into the echo canceller's frame size.
type aecFrame struct {
	// pending gathers the audio; clean receives the result.
	pending, clean []int16
	count          int // frames cancelled
}

func newAudioInput(s *Session, cfg engine.InputConfig, aec engine.EchoCanceller, tap *echoTap) (*audioInput, error) {
	det := cfg.Detector
	if det == nil {
		det = vad.NewEnergy()
	}
	a := &audioInput{s: s, det: det, cfg: cfg, aec: aec, tap: tap, judged: engine.NewInputJudge(cfg)}
	if aec != nil {
		n := aec.FrameSize()
		a.frame.pending, a.frame.clean = make([]int16, 0, n), make([]int16, n)
	}
	return a, nil
}

// start opens the recogniser, if the agent has one, and relays its
// transcripts to the conductor through the arbiter. If the recogniser
// fails and the agent has a backup, the backup takes over.
func (a *audioInput) start(ctx context.Context, g *errgroup.Group) error {
	recs := []stt.Recognizer{a.s.agent.STT, a.s.agent.BackupSTT}
	if recs[0] == nil {
		recs = recs[1:]
	}
	if len(recs) == 0 || recs[0] == nil {
		// No words will come: a short sound over the agent is judged on
		// its length alone.
		a.mu.Lock()
		a.judged.NoRecognizer()
		a.mu.Unlock()
		return nil
	}
	open := func() (stt.Stream, error) {
		var err error
		for len(recs) > 0 {
			rec := recs[0]
			recs = recs[1:]
			if rec == nil {
				continue
			}
			if err != nil {
				a.s.post(engine.ProviderFailover{Provider: "stt", Err: err})
			}
			var stream stt.Stream
			if stream, err = rec.Stream(ctx, a.cfg.Rate); err == nil {
				a.mu.Lock()
				a.stream = stream
				a.mu.Unlock()
				return stream, nil
			}
		}
		return nil, err
	}
	stream, err := open()
	if err != nil {
		return fmt.Errorf("runtime: open speech recognition: %w", err)
	}
	g.Go(func() error {
		for {
			tr, err := stream.Recv()
			if err == nil {
				a.relay(ctx, tr)
				continue
			}
			a.mu.Lock()
			a.stream = nil
			a.mu.Unlock()
			stream.Close()
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil
			}
			if len(recs) == 0 || recs[0] == nil {
				a.s.post(engine.ProviderFailure{Provider: "stt", Err: err})
				return nil
			}
			a.s.post(engine.ProviderFailover{Provider: "stt", Err: err})
			if stream, err = open(); err != nil {
				a.s.post(engine.ProviderFailure{Provider: "stt", Err: err})
				return nil
			}
		}
	})
	return nil
}

// relay passes a transcript through the judge's transcript check: words
// that are the agent's own, or a backchannel, while the agent is audible
// never become the caller's turn.
func (a *audioInput) relay(ctx context.Context, tr stt.Transcript) {
	played, agent := "", vad.Agent(a.agentNow.Load())
	if a.judged.Judging(tr.Text) {
		// What was played matters also just after a resume, when the
		// agent may be silent for a moment.
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		played, _ = onCore(qctx, a.s, (*engine.Core).RecentlyPlayed)
		cancel()
	}
	a.mu.Lock()
	d, ins := a.judged.Transcript(tr.Text, tr.Final, played, agent)
	a.mu.Unlock()
	if d.Action == vad.Resume {
		a.endPending.Store(true)
	}
	for _, in := range ins {
		if ut, ok := in.(engine.UserTranscript); ok {
			ut.Confidence = tr.Confidence
			in = ut
		}
		if a.s.send(ctx, in) != nil {
			return // the session is ending
		}
	}
}

// agent reports what the agent's output is doing, as the caller's audio
// now may hear it; cancelled says whether the frame went through the echo
// canceller, whose view of the frame is then the one to use.
func (a *audioInput) agent(cancelled bool) vad.Agent {
	// The judge is shared with relay's goroutine: under a.mu.
	a.mu.Lock()
	defer a.mu.Unlock()
	audible := false
	if cancelled {
		audible = a.aec.FarActive()
	} else {
		audible = a.tap.audibleWithin(a.judged.EchoTail())
	}
	return a.judged.Agent(audible, a.s.floor.speaking.Load(), a.s.floor.played.Load())
}

func (a *audioInput) push(ctx context.Context, f media.Frame) error {
	if a.aec == nil || f.SampleRate != a.cfg.Rate {
		return a.judge(ctx, f, false)
	}
	s := f.Samples
	for len(s) > 0 {
		n := min(cap(a.frame.pending)-len(a.frame.pending), len(s))
		a.frame.pending = append(a.frame.pending, s[:n]...)
		s = s[n:]
		if len(a.frame.pending) < cap(a.frame.pending) {
			break
		}
		if err := a.aec.Process(a.frame.pending, a.frame.clean); err != nil {
			return fmt.Errorf("runtime: echo cancellation: %w", err)
		}
		a.frame.pending = a.frame.pending[:0]
		if a.frame.count++; a.frame.count%25 == 0 {
			if d, ok := a.aec.Delay(); ok {
				a.mu.Lock()
				a.judged.SetEchoTail(engine.EchoTail(d))
				a.mu.Unlock()
			}
			if err := a.reportPath(ctx); err != nil {
				return err
			}
		}
		if err := a.judge(ctx, media.Frame{Samples: a.frame.clean, SampleRate: f.SampleRate}, true); err != nil {
			return err
		}
	}
	return nil
}

// judge runs voice activity and the arbiter on one clean frame and feeds
// the recogniser.
func (a *audioInput) judge(ctx context.Context, f media.Frame, cancelled bool) error {
	prob, err := a.det.Detect(f)
	if err != nil {
		return fmt.Errorf("runtime: voice activity: %w", err)
	}
	if j, ok := a.aec.(echoJudge); ok && cancelled && j.EchoOnly() {
		// Too quiet, next to what was played, to be anything but its echo.
		prob = 0
	}
	agent := a.agent(cancelled)
	a.agentNow.Store(uint32(agent))
	a.mu.Lock()
	stream := a.stream
	d, in := a.judged.Frame(prob, f.Duration(), agent)
	a.mu.Unlock()
	if stream != nil {
		if st, ok := stream.(stt.SpeechStarter); ok && (d.Action == vad.SpeechStart || d.Action == vad.Suspect) {
			if err := st.StartOfSpeech(); err != nil {
				return fmt.Errorf("runtime: speech recognition: %w", err)
			}
		}
		if err := stream.Write(f); err != nil {
			a.unheard.Add(1)
			// The frame's turn-taking decision stands and the caller's
			// line stays up: a recogniser that failed over meanwhile, or
			// fell behind, costs words, which the event reports.
			if a.current(stream) && ctx.Err() == nil && !a.writeFailing.Swap(true) {
				a.s.post(engine.ProviderFailure{Provider: "stt", Err: err})
			}
			return a.decide(ctx, in)
		}
		a.writeFailing.Store(false)
		// A ruled-out suspicion ends its utterance too, so the recogniser
		// finalises it now, inside the arbiter's drop window; a short
		// sound that ended is finalised so its words can decide.
		ended := a.endPending.Swap(false)
		if d.Action == vad.SpeechStop || d.Action == vad.Resume || d.Action == vad.AwaitWords || ended {
			if err := stream.EndOfSpeech(); err != nil {
				return fmt.Errorf("runtime: speech recognition: %w", err)
			}
		}
	}
	return a.decide(ctx, in)
}

// reportPath tells the conductor what the canceller has measured of the
// line's echo when it learns something new: that there is none, that there
// is one, or that its delay or gain moved, so an operator can see why a
// barge-in was or was not taken.
func (a *audioInput) reportPath(ctx context.Context) error {
	m, ok := a.aec.(echoPather)
	if !ok {
		return nil
	}
	p := m.EchoPath()
	last := a.path
	moved := p.State != last.State || (p.Delay-last.Delay).Abs() > 10*time.Millisecond || math.Abs(p.GainDB-last.GainDB) > 3
	if p.State == aec.EchoUnknown || !moved {
		return nil
	}
	a.path = p
	in := engine.EchoPathMeasured{State: p.State.String()}
	if p.State == aec.EchoPresent {
		in.Delay, in.GainDB = p.Delay, math.Round(p.GainDB*10)/10
	}
	return a.s.send(ctx, in)
}

// current reports whether stream is still the recogniser in use.
func (a *audioInput) current(stream stt.Stream) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stream == stream
}

// decide hands the judge's input, if any, to the conductor.
func (a *audioInput) decide(ctx context.Context, in engine.Input) error {
	if in == nil {
		return nil
	}
	return a.s.send(ctx, in)
}

// echoTap sits between the Player and the session's sink. It feeds the
// echo canceller exactly what was played, silence included, at the input
// rate, and remembers when the agent was last audible.
type echoTap struct {
	next        media.Sink
	aec         engine.EchoCanceller
	rs          *media.Resampler // nil when the rates match
	buf         []int16
	clock       engine.Clock
	lastAudible atomic.Int64 // clock time in ns; 0: never
	// continuous: idle silence goes to the sink too (WithContinuousOutput).
	continuous bool
}

func newEchoTap(next media.Sink, aec engine.EchoCanceller, clock engine.Clock, outRate, inRate int) (*echoTap, error) {
	t := &echoTap{next: next, aec: aec, clock: clock}
	if aec != nil && outRate != inRate {
		rs, err := media.NewResampler(outRate, inRate)
		if err != nil {
			return nil, err
		}
		t.rs = rs
		t.buf = make([]int16, 0, rs.OutputLen(media.SamplesFor(outRate, 20*time.Millisecond)))
	}
	return t, nil
}

// WriteFrame implements media.Sink. Idle silence (epoch 0) goes to the
// canceller only, unless the output is continuous: otherwise the sink sees
// what it saw before.
func (t *echoTap) WriteFrame(f media.Frame) error {
	if t.aec != nil {
		s := f.Samples
		if t.rs != nil {
			t.buf = t.rs.Process(t.buf[:0], s)
			s = t.buf
		}
		t.aec.Playback(s)
	}
	if f.Epoch == 0 {
		if t.continuous {
			return t.next.WriteFrame(f)
		}
		return nil
	}
	for _, v := range f.Samples {
		if v != 0 {
			t.lastAudible.Store(t.clock.Now().UnixNano())
			break
		}
	}
	return t.next.WriteFrame(f)
}

// audibleWithin reports whether audible output was written within d.
func (t *echoTap) audibleWithin(d time.Duration) bool {
	last := t.lastAudible.Load()
	return last != 0 && t.clock.Now().UnixNano()-last <= int64(d)
}

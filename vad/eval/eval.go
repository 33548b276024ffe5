package eval

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/vad"
)

// Mode is a barge-in pipeline, from plain voice activity to the whole
// arbiter.
type Mode string

// Modes, each adding one stage to the one before.
const (
	// None: voice activity on the raw microphone; speech while the agent
	// is audible interrupts it, as in most frameworks today.
	None Mode = "none"
	// Gating: a raised threshold and a minimum duration while the agent
	// is audible.
	Gating Mode = "gating"
	// AEC: gating on echo-cancelled audio.
	AEC Mode = "aec"
	// Full: echo cancellation, gating, pause and listen (false-interruption
	// resume) and the transcript check.
	Full Mode = "full"
	// FullCold is Full in the first turn of a call: the echo canceller
	// has heard nothing of the line before the scene. (AEC and Full run
	// after the scene's earlier turn, Scene.Before, as in every other
	// turn of a call.)
	FullCold Mode = "full_cold"
)

// Modes lists every mode, in the order they build on each other, then
// Full at a call's first turn.
var Modes = []Mode{None, Gating, AEC, Full, FullCold}

// Kind is what a scene holds.
type Kind string

// Kinds of scene.
const (
	Echo        Kind = "echo"        // the agent's echo only: any barge-in is false
	BargeIn     Kind = "barge_in"    // the caller talks over the agent: it must stop
	Backchannel Kind = "backchannel" // "uh-huh" over the agent: it must go on
)

// Scene is one call moment, kept in parts so that the echo follows what the
// output really plays: when the arbiter pauses the output, the echo stops
// too, and it resumes from the same sample.
type Scene struct {
	Name string
	Kind Kind
	Rate int
	// Agent is the audio the agent's output would play, from the scene's
	// start, silences included.
	Agent []int16
	// AgentText is what the agent says in Agent.
	AgentText string
	// EchoDelay and EchoTaps are the echo path: the microphone hears
	// played[n-EchoDelay-k]*EchoTaps[k], summed over k.
	EchoDelay int
	EchoTaps  []float64
	// User and Noise are what else the microphone hears, on the scene's
	// timeline; the scene lasts len(User) samples.
	User, Noise []int16
	// UserOnset is when the caller starts speaking (-1: never), and
	// UserEnd when the caller's sound ends (0: not known).
	UserOnset, UserEnd time.Duration
	// GainDB labels the echo level, for the report.
	GainDB float64
	// NoEcho labels a line that returns no echo at all (a digital trunk);
	// its echo-only scenes are left out of the false barge-in and echo
	// pause figures, which are about echo, and counted apart.
	NoEcho bool
	// UserLevelDB labels the caller's level relative to the agent's, in
	// dB (0: the same), and Voice the caller's voice, for the report.
	UserLevelDB float64
	Voice       string
	// Before is what the agent played in an earlier turn of the call,
	// heard through the same echo path with the caller silent. The echo
	// canceller hears it first (except in FullCold), as it has heard the
	// greeting and every turn since by the time the caller interrupts.
	Before []int16

	// Mic, if set, is a recording of the microphone: the echo of Agent
	// played in full, plus the caller and the line's noise. It takes the
	// place of the simulated microphone (EchoDelay, EchoTaps, User and
	// Noise are not used) and the scene lasts len(Mic) samples. A
	// recording cannot follow the output: when the arbiter pauses, the
	// recorded echo goes on, and the canceller goes on hearing the Agent
	// audio that made it. So a recorded scene measures the decisions
	// open loop, and pause and listen looks worse on it than on the line.
	Mic []int16
	// BeforeMic, with Mic, is the recording of the microphone while the
	// agent played Before (the same length as Before, or it is cut or
	// padded with silence). Without it a recorded scene's canceller
	// hears nothing before the scene, as in FullCold.
	BeforeMic []int16
}

// Recorded reports whether the scene's microphone is a recording (Mic)
// rather than simulated from its parts.
func (sc Scene) Recorded() bool { return sc.Mic != nil }

// HeardBefore returns what the microphone heard while the agent played
// Before: BeforeMic for a recorded scene, else Before through the scene's
// echo path over the scene's noise, as the canceller is warmed with it.
func (sc Scene) HeardBefore() []int16 {
	if sc.Recorded() {
		if sc.BeforeMic == nil {
			return nil
		}
		mic := make([]int16, len(sc.Before))
		copy(mic, sc.BeforeMic)
		return mic
	}
	taps := echoPath(sc)
	mic := make([]int16, len(sc.Before))
	for k := range mic {
		acc := 0.0
		if len(sc.Noise) > 0 {
			acc = float64(sc.Noise[k%len(sc.Noise)])
		}
		for _, t := range taps {
			if p := k - t.lag; p >= 0 {
				acc += t.gain * float64(sc.Before[p])
			}
		}
		mic[k] = clamp(acc)
	}
	return mic
}

// Canceller is the echo canceller under test (media/aec's Canceller).
type Canceller interface {
	Playback(samples []int16)
	Process(near, out []int16) error
	FarActive() bool
	Delay() (time.Duration, bool)
	Close() error
}

// echoJudge is a canceller that can tell, before it has converged, that a
// frame holds nothing but echo (media/aec's Canceller can).
type echoJudge interface{ EchoOnly() bool }

// Transcriber recognises a piece of audio, as the recogniser of a call
// would, for the transcript check.
type Transcriber interface {
	Transcribe(ctx context.Context, rate int, audio [][]int16) ([][]Word, error)
}

// Word is a recognised word and when, within its audio, it ended.
type Word struct {
	Text string
	End  time.Duration
}

// Config sets up an evaluation.
type Config struct {
	// Detector makes one voice activity detector per scene and mode.
	Detector func(rate int) (vad.Detector, error)
	// Canceller makes one echo canceller per scene (AEC and Full).
	Canceller func(rate int) (Canceller, error)
	// Transcriber, if set, gives Full its transcript check.
	Transcriber Transcriber
	// STTLatency is how long after a word ends its transcript reaches the
	// arbiter (default 300 ms).
	STTLatency time.Duration
	// FinalLatency is how long after the arbiter asks for a short
	// sound's words (AwaitWords) the recogniser's final reaches it, if it
	// has not already (default 100 ms).
	FinalLatency time.Duration
	// Arbiter is the configuration under test (zero: the defaults).
	Arbiter vad.ArbiterConfig
	// Trace, if set, is called with each scene's outcome under each mode,
	// for looking into what went wrong.
	Trace func(m Mode, sc Scene, t Trace)
}

// Trace is what happened in one scene under one mode.
type Trace struct {
	// Interrupted: the agent's turn was stopped (a Confirm).
	Interrupted bool
	// Paused: the output paused at least once (a Suspect).
	Paused bool
	// Detect is how long after the caller's onset the agent went silent
	// (-1: it did not).
	Detect time.Duration
	// Decisions lists the arbiter's decisions in order, with their audio
	// time, e.g. "1.24s suspect speech_over_agent".
	Decisions []string
}

// Result is one mode's figures over the scenes.
type Result struct {
	Mode  Mode   `json:"mode"`
	VAD   string `json:"vad"`
	Rate  int    `json:"rate"`
	Clips int    `json:"clips"`
	// FalseBargeInRate is the share of echo-only scenes at gains of -6 dB
	// or lower in which the agent was interrupted (lines without echo left
	// out: see NoEchoFalseBargeInRate).
	FalseBargeInRate float64 `json:"false_barge_in_rate"`
	// FalseBargeInByGain is the same share per echo gain, -3 dB included.
	FalseBargeInByGain map[string]float64 `json:"false_barge_in_rate_by_gain"`
	// MissRate is the share of barge-in scenes in which the agent was not
	// interrupted after the caller began.
	MissRate float64 `json:"miss_rate"`
	// DetectP50 and DetectP95 are percentiles of the time from the
	// caller's speech onset to the agent going silent (paused or stopped),
	// over detected barge-ins.
	DetectP50 float64 `json:"detect_p50_ms"`
	DetectP95 float64 `json:"detect_p95_ms"`
	// BackchannelRate is the share of backchannel scenes that interrupted
	// the agent.
	BackchannelRate float64 `json:"backchannel_interrupt_rate"`
	// ResumeGapP50 and ResumeGapP95 are percentiles, over backchannel
	// scenes that paused the output and did not interrupt it, of the time
	// from the end of the caller's sound to the output playing again:
	// the silence the caller waits through. ResumeGaps counts them.
	ResumeGapP50 float64 `json:"resume_gap_p50_ms"`
	ResumeGapP95 float64 `json:"resume_gap_p95_ms"`
	ResumeGaps   int     `json:"resume_gaps"`
	// PauseRate is the share of echo-only scenes in which the output
	// paused at least once (Full only): a stutter, not an interruption.
	// Lines without echo (NoEcho scenes) are left out: see NoEchoPauseRate.
	PauseRate float64 `json:"echo_pause_rate"`
	// EchoClips, BargeIns and Backchannels count the scenes of each kind.
	EchoClips    int `json:"echo_clips"`
	BargeIns     int `json:"barge_in_clips"`
	Backchannels int `json:"backchannel_clips"`

	// NoEchoFalseBargeInRate and NoEchoPauseRate are FalseBargeInRate
	// and PauseRate over the echo-only scenes of lines without echo
	// (noise alone), which the other echo figures leave out;
	// NoEchoEchoClips counts them (included in EchoClips).
	NoEchoFalseBargeInRate float64 `json:"no_echo_false_barge_in_rate"`
	NoEchoPauseRate        float64 `json:"no_echo_pause_rate"`
	NoEchoEchoClips        int     `json:"no_echo_echo_clips"`
	// BargeInsBy breaks the barge-in figures out by line (echo or none)
	// and caller level, in the order echo then no echo, louder level
	// first.
	BargeInsBy []BargeInSlice `json:"barge_ins_by_condition"`
	// BackchannelRateByVoice is BackchannelRate per caller voice.
	BackchannelRateByVoice map[string]float64 `json:"backchannel_interrupt_rate_by_voice,omitempty"`
}

// BargeInSlice is the barge-in figures over one line and caller level.
type BargeInSlice struct {
	// Line is "echo" or "no_echo".
	Line string `json:"line"`
	// CallerLevelDB is the caller's level relative to the agent's.
	CallerLevelDB float64 `json:"caller_level_db"`
	Clips         int     `json:"clips"`
	MissRate      float64 `json:"miss_rate"`
	DetectP50     float64 `json:"detect_p50_ms"`
	DetectP95     float64 `json:"detect_p95_ms"`
}

// Lines of BargeInSlice.
const (
	LineEcho   = "echo"
	LineNoEcho = "no_echo"
)

// outcome is what happened in one scene under one mode.
type outcome struct {
	interrupted bool          // a Confirm came
	confirmedAt time.Duration // when
	silencedAt  time.Duration // first Suspect or Confirm at or after the onset, -1 if none
	paused      bool          // some Suspect came
	resumedAt   time.Duration // the last Resume, -1 if none
	decisions   []string
}

const frameDur = 20 * time.Millisecond

// Run plays every scene under each mode and returns one Result per mode,
// in the order of modes.
func Run(ctx context.Context, cfg Config, scenes []Scene, modes []Mode, vadName string) ([]Result, error) {
	if cfg.Detector == nil {
		return nil, errors.New("eval: no detector")
	}
	if cfg.STTLatency == 0 {
		cfg.STTLatency = 300 * time.Millisecond
	}
	if cfg.FinalLatency == 0 {
		cfg.FinalLatency = 100 * time.Millisecond
	}
	dets := &detectors{make: cfg.Detector}
	defer dets.close()
	outs := make([][]outcome, len(modes))
	for i, m := range modes {
		if (m == Full || m == FullCold) && cfg.Transcriber != nil {
			o, err := runWithTranscripts(ctx, cfg, dets, scenes, m)
			if err != nil {
				return nil, err
			}
			outs[i] = o
			continue
		}
		for _, sc := range scenes {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			o, _, err := play(cfg, dets, m, sc, nil)
			if err != nil {
				return nil, fmt.Errorf("eval: %s: %s: %w", m, sc.Name, err)
			}
			outs[i] = append(outs[i], o)
		}
	}
	if cfg.Trace != nil {
		for i, m := range modes {
			for j, sc := range scenes {
				o := outs[i][j]
				cfg.Trace(m, sc, Trace{Interrupted: o.interrupted, Paused: o.paused, Detect: o.silencedAt, Decisions: o.decisions})
			}
		}
	}
	res := make([]Result, len(modes))
	for i, m := range modes {
		res[i] = summarise(m, vadName, scenes, outs[i])
	}
	return res, nil
}

// runWithTranscripts runs Full twice. The first run finds the suspicions and
// the audio the recogniser would have heard around each; one batch of
// recognition transcribes them; the second run delivers each transcript
// STTLatency after its last word ended, to the suspicion it belongs to.
// Until a transcript changes a decision both runs are the same, sample for
// sample; a later suspicion that did not happen in the first run gets no
// transcript.
func runWithTranscripts(ctx context.Context, cfg Config, dets *detectors, scenes []Scene, m Mode) ([]outcome, error) {
	type seg struct {
		scene int
		sus   suspicion
	}
	var segs []seg
	var audio [][]int16
	for i, sc := range scenes {
		_, sus, err := play(cfg, dets, m, sc, nil)
		if err != nil {
			return nil, fmt.Errorf("eval: %s: %s: %w", m, sc.Name, err)
		}
		for _, s := range sus {
			segs = append(segs, seg{i, s})
			audio = append(audio, s.audio)
		}
	}
	words, err := cfg.Transcriber.Transcribe(ctx, scenes[0].Rate, audio)
	if err != nil {
		return nil, fmt.Errorf("eval: transcribe: %w", err)
	}
	plans := make([][]transcript, len(scenes))
	for j, s := range segs {
		if len(words[j]) == 0 {
			// The recogniser's empty final, when the arbiter asks for
			// the words.
			plans[s.scene] = append(plans[s.scene], transcript{onset: s.sus.onset, at: math.MaxInt64})
			continue
		}
		text := ""
		for _, w := range words[j] {
			text += w.Text + " "
		}
		last := words[j][len(words[j])-1].End
		plans[s.scene] = append(plans[s.scene], transcript{
			onset: s.sus.onset,
			at:    s.sus.from + last + cfg.STTLatency,
			text:  text,
		})
	}
	var outs []outcome
	for i, sc := range scenes {
		o, _, err := play(cfg, dets, m, sc, plans[i])
		if err != nil {
			return nil, fmt.Errorf("eval: %s: %s: %w", m, sc.Name, err)
		}
		outs = append(outs, o)
	}
	return outs, nil
}

// detectors hands out a fresh detector per scene, reusing one that can be
// reset: a neural detector is costly to make.
type detectors struct {
	make func(rate int) (vad.Detector, error)
	det  vad.Detector
	rate int
}

type resetter interface{ Reset() }

func (d *detectors) get(rate int) (vad.Detector, error) {
	if r, ok := d.det.(resetter); ok && d.rate == rate {
		r.Reset()
		return d.det, nil
	}
	d.close()
	det, err := d.make(rate)
	if err != nil {
		return nil, err
	}
	d.det, d.rate = det, rate
	return det, nil
}

func (d *detectors) close() {
	if c, ok := d.det.(interface{ Close() error }); ok {
		c.Close()
	}
	d.det = nil
}

// suspicion is a Suspect decision and the clean audio around it: from
// 200 ms before the speech onset to when the arbiter must decide.
type suspicion struct {
	onset, from time.Duration
	audio       []int16
}

// transcript is a recognition result planned for one suspicion.
type transcript struct {
	onset, at time.Duration
	text      string
	done      bool
}

// play runs one scene under one mode, frame by frame: the output plays the
// agent's audio unless paused, the microphone hears its echo plus the
// caller and the noise, and the arbiter decides.
func play(cfg Config, dets *detectors, m Mode, sc Scene, plan []transcript) (outcome, []suspicion, error) {
	rate := sc.Rate
	n := media.SamplesFor(rate, frameDur)
	det, err := dets.get(rate)
	if err != nil {
		return outcome{}, nil, err
	}
	var aec Canceller
	if m == AEC || m == Full || m == FullCold {
		if cfg.Canceller == nil {
			return outcome{}, nil, errors.New("no echo canceller")
		}
		if aec, err = cfg.Canceller(rate); err != nil {
			return outcome{}, nil, err
		}
		defer aec.Close()
		if m != FullCold {
			if err := warm(aec, sc, n); err != nil {
				return outcome{}, nil, err
			}
		}
	}
	acfg := cfg.Arbiter
	switch m {
	case None:
		// Plain voice activity: speech over the agent interrupts it.
		acfg.SpeakingThreshold = acfg.Segmenter.ActivationThreshold
		if acfg.SpeakingThreshold == 0 {
			acfg.SpeakingThreshold = vad.DefaultActivationThreshold
		}
		acfg.SpeakingMinSpeech = acfg.Segmenter.MinSpeech
		if acfg.SpeakingMinSpeech == 0 {
			acfg.SpeakingMinSpeech = vad.DefaultMinSpeech
		}
		acfg.NoResume = true
	case Gating, AEC:
		acfg.NoResume = true
	}
	if cfg.Transcriber == nil {
		// No recogniser: a short sound's verdict cannot wait for words.
		acfg.WordsWait = -1
	}
	arb := vad.NewArbiter(acfg)

	taps := echoPath(sc)
	total := len(sc.User)
	if sc.Recorded() {
		total = len(sc.Mic)
	}
	played := make([]int16, total) // what the output played, on the scene's timeline
	mic := make([]int16, n)
	clean := make([]int16, n)
	cleanAll := make([]int16, 0, total)
	cursor := 0 // next sample of sc.Agent to play
	// The agent's turn is under way until its last audible sample has
	// played (or it was interrupted).
	turnEnd := len(sc.Agent)
	for turnEnd > 0 && sc.Agent[turnEnd-1] == 0 {
		turnEnd--
	}
	paused := false
	lastAudible := time.Duration(-1)
	o := outcome{silencedAt: -1, resumedAt: -1}
	var sus []suspicion
	var suspectOnset, pausedSince time.Duration
	onset := sc.UserOnset

	for start := 0; start+n <= total; start += n {
		at := durOf(rate, start)
		// The output plays a frame, unless paused; in a recording it
		// played on regardless.
		for i := range n {
			var v int16
			switch k := start + i; {
			case sc.Recorded():
				if k < len(sc.Agent) {
					v = sc.Agent[k]
				}
				cursor = min(k+1, len(sc.Agent))
			case !paused && !o.interrupted && cursor < len(sc.Agent):
				v = sc.Agent[cursor]
				cursor++
			}
			played[start+i] = v
			if v != 0 {
				lastAudible = at
			}
		}
		// The microphone hears the echo of what played, the caller and
		// the noise.
		for i := range n {
			k := start + i
			if sc.Recorded() {
				mic[i] = sc.Mic[k]
				continue
			}
			acc := float64(sc.User[k]) + float64(sc.Noise[k])
			for _, t := range taps {
				if p := k - t.lag; p >= 0 {
					acc += t.gain * float64(played[p])
				}
			}
			mic[i] = clamp(acc)
		}
		frame := mic
		audible := lastAudible >= 0 && at-lastAudible <= arb.Config().EchoTail
		if aec != nil {
			aec.Playback(played[start : start+n])
			if err := aec.Process(mic, clean); err != nil {
				return outcome{}, nil, err
			}
			frame = clean
			audible = aec.FarActive()
			if d, ok := aec.Delay(); ok {
				arb.SetEchoTail(d + 150*time.Millisecond)
			}
		}
		cleanAll = append(cleanAll, frame...)
		agent := vad.AgentSilent
		switch {
		case audible:
			agent = vad.AgentAudible
		case !o.interrupted && cursor < turnEnd:
			agent = vad.AgentTurn
		}
		prob, err := det.Detect(media.Frame{Samples: frame, SampleRate: rate})
		if err != nil {
			return outcome{}, nil, err
		}
		if e, ok := aec.(echoJudge); ok && e.EchoOnly() {
			prob = 0
		}
		now := at + frameDur
		d := arb.Frame(prob, frameDur, agent)
		// A planned transcript reaches the arbiter once it is due and its
		// suspicion is pending; the recogniser's words come as they are
		// recognised, so one due earlier waits for the suspicion.
		for i := range plan {
			if d.Action != vad.NoAction {
				break
			}
			p := &plan[i]
			if !p.done && p.at <= now && arb.Suspecting() && p.onset == suspectOnset {
				p.done = true
				if p.text == "" {
					d = arb.NoWords()
					continue
				}
				d, _ = arb.Final(p.text, playedText(sc, cursor), agent)
				if cfg.Trace != nil {
					o.decisions = append(o.decisions, fmt.Sprintf("%.2fs heard %q", now.Seconds(), p.text))
				}
			}
		}
		if d.Action != vad.NoAction && cfg.Trace != nil {
			o.decisions = append(o.decisions, fmt.Sprintf("%.2fs %s %s (onset %.2fs)", now.Seconds(), d.Action, d.Reason, d.Onset.Seconds()))
		}
		switch d.Action {
		case vad.Suspect:
			paused, o.paused, suspectOnset, pausedSince = true, true, d.Onset, now
			from := max(d.Onset-200*time.Millisecond, 0)
			sus = append(sus, suspicion{onset: d.Onset, from: from})
		case vad.Resume:
			paused, o.resumedAt = false, now
		case vad.AwaitWords:
			// The recogniser is told the utterance ended: its final
			// comes soon, whenever its last word ended.
			for i := range plan {
				if p := &plan[i]; !p.done && p.onset == suspectOnset {
					p.at = min(p.at, now+cfg.FinalLatency)
				}
			}
		case vad.Confirm:
			if !o.interrupted {
				o.interrupted, o.confirmedAt = true, now
				// The agent went silent when the pause that ended in
				// this confirmation began, or now.
				silenced := now
				if paused {
					silenced = pausedSince
				}
				if onset >= 0 && now >= onset {
					o.silencedAt = max(silenced-onset, 0)
				}
			}
		}
	}
	// The recogniser hears each suspicion from just before its onset to
	// the time the arbiter must decide by.
	cfgd := arb.Config()
	for i := range sus {
		s := &sus[i]
		from := media.SamplesFor(rate, s.from)
		to := min(media.SamplesFor(rate, s.onset+cfgd.ShortSound+cfgd.ResumeQuiet), len(cleanAll))
		if from < to {
			s.audio = slices.Clone(cleanAll[from:to])
		}
	}
	return o, sus, nil
}

// warm plays the scene's earlier turn to the canceller, frame by frame,
// with what the microphone heard meanwhile (HeardBefore). A recorded scene
// without a recording of its earlier turn has nothing to warm with.
func warm(aec Canceller, sc Scene, n int) error {
	if sc.Recorded() && sc.BeforeMic == nil {
		return nil
	}
	mic := sc.HeardBefore()
	out := make([]int16, n)
	for start := 0; start+n <= len(sc.Before); start += n {
		aec.Playback(sc.Before[start : start+n])
		if err := aec.Process(mic[start:start+n], out); err != nil {
			return err
		}
	}
	return nil
}

// tap is one path of the echo: a delay in samples and a gain.
type tap struct {
	lag  int
	gain float64
}

func echoPath(sc Scene) []tap {
	var taps []tap
	for j, g := range sc.EchoTaps {
		if g != 0 {
			taps = append(taps, tap{sc.EchoDelay + j, g})
		}
	}
	return taps
}

// playedText estimates the words played by the cursor: the agent's words
// spread evenly over its audio.
func playedText(sc Scene, cursor int) string {
	words := vad.Words(sc.AgentText)
	if len(sc.Agent) == 0 || len(words) == 0 {
		return ""
	}
	k := min(len(words), int(math.Ceil(float64(len(words))*float64(cursor)/float64(len(sc.Agent))))+1)
	out := ""
	for _, w := range words[:k] {
		out += w + " "
	}
	return out
}

func summarise(m Mode, vadName string, scenes []Scene, outs []outcome) Result {
	r := Result{Mode: m, VAD: vadName, Clips: len(scenes), FalseBargeInByGain: map[string]float64{}}
	if len(scenes) > 0 {
		r.Rate = scenes[0].Rate
	}
	var falseLow, echoLow, paused, missed, backInt, echoes, noEchoFalse, noEchoPaused int
	byGain := map[float64][2]int{}
	var lat, gaps []float64
	type sliceKey struct {
		line  string
		level float64
	}
	type sliceAcc struct {
		n, missed int
		lat       []float64
	}
	slices_ := map[sliceKey]*sliceAcc{}
	byVoice := map[string][2]int{}
	for i, sc := range scenes {
		o := outs[i]
		switch sc.Kind {
		case Echo:
			r.EchoClips++
			if sc.NoEcho {
				r.NoEchoEchoClips++
				if o.interrupted {
					noEchoFalse++
				}
				if o.paused {
					noEchoPaused++
				}
				continue
			}
			echoes++
			g := byGain[sc.GainDB]
			g[1]++
			if o.interrupted {
				g[0]++
			}
			byGain[sc.GainDB] = g
			if sc.GainDB <= -6 {
				echoLow++
				if o.interrupted {
					falseLow++
				}
			}
			if o.paused {
				paused++
			}
		case BargeIn:
			r.BargeIns++
			k := sliceKey{LineEcho, sc.UserLevelDB}
			if sc.NoEcho {
				k.line = LineNoEcho
			}
			acc := slices_[k]
			if acc == nil {
				acc = &sliceAcc{}
				slices_[k] = acc
			}
			acc.n++
			onset := sc.UserOnset
			if !o.interrupted || o.confirmedAt < onset || o.silencedAt < 0 {
				missed++
				acc.missed++
				continue
			}
			ms := float64(o.silencedAt) / float64(time.Millisecond)
			lat = append(lat, ms)
			acc.lat = append(acc.lat, ms)
		case Backchannel:
			r.Backchannels++
			v := byVoice[sc.Voice]
			v[1]++
			if o.interrupted {
				backInt++
				v[0]++
			}
			byVoice[sc.Voice] = v
			if !o.interrupted && o.paused && o.resumedAt >= 0 && sc.UserEnd > 0 {
				gaps = append(gaps, float64(max(o.resumedAt-sc.UserEnd, 0))/float64(time.Millisecond))
			}
		}
	}
	r.FalseBargeInRate = ratio(falseLow, echoLow)
	for g, c := range byGain {
		r.FalseBargeInByGain[strconv.FormatFloat(g, 'f', -1, 64)] = ratio(c[0], c[1])
	}
	r.PauseRate = ratio(paused, echoes)
	r.NoEchoFalseBargeInRate = ratio(noEchoFalse, r.NoEchoEchoClips)
	r.NoEchoPauseRate = ratio(noEchoPaused, r.NoEchoEchoClips)
	keys := make([]sliceKey, 0, len(slices_))
	for k := range slices_ {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].line != keys[j].line {
			return keys[i].line == LineEcho
		}
		return keys[i].level > keys[j].level
	})
	for _, k := range keys {
		acc := slices_[k]
		r.BargeInsBy = append(r.BargeInsBy, BargeInSlice{
			Line: k.line, CallerLevelDB: k.level, Clips: acc.n,
			MissRate:  ratio(acc.missed, acc.n),
			DetectP50: percentile(acc.lat, 50), DetectP95: percentile(acc.lat, 95),
		})
	}
	if len(byVoice) > 1 || (len(byVoice) == 1 && !mapHas(byVoice, "")) {
		r.BackchannelRateByVoice = map[string]float64{}
		for v, c := range byVoice {
			r.BackchannelRateByVoice[v] = ratio(c[0], c[1])
		}
	}
	r.MissRate = ratio(missed, r.BargeIns)
	r.BackchannelRate = ratio(backInt, r.Backchannels)
	r.DetectP50, r.DetectP95 = percentile(lat, 50), percentile(lat, 95)
	r.ResumeGapP50, r.ResumeGapP95, r.ResumeGaps = percentile(gaps, 50), percentile(gaps, 95), len(gaps)
	return r
}

func mapHas(m map[string][2]int, k string) bool {
	_, ok := m[k]
	return ok
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// percentile is the nearest-rank percentile of xs (0 for none).
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	k := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(k, 0)]
}

func clamp(v float64) int16 {
	return int16(max(min(math.Round(v), math.MaxInt16), math.MinInt16))
}

func durOf(rate, samples int) time.Duration {
	return time.Duration(samples) * time.Second / time.Duration(rate)
}

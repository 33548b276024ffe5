package corpus

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"
)

// Kind says what a clip tests.
type Kind string

const (
	// Echo clips hold only the echo of the agent (and noise): any barge-in
	// detected in them is a false one.
	Echo Kind = "echo"
	// BargeIn clips hold the caller talking over the agent: a barge-in
	// should be detected, soon after UserOnset.
	BargeIn Kind = "barge_in"
	// Backchannel clips hold the caller saying "uh-huh" or the like over
	// the agent: not an interruption.
	Backchannel Kind = "backchannel"
)

// Clip is one test case: what the agent played and what came back from the
// caller's side of the line.
type Clip struct {
	// Name is unique within a corpus and the same for the same Options,
	// a slash-separated path such as "echo/d120/g-6/noise/s3".
	Name string
	Kind Kind
	// Rate is the sample rate of Far and Near, 8000 or 16000.
	Rate int
	// Far is what the agent's output played: an echo canceller's reference.
	Far []int16
	// Near is what the caller's microphone sent: the echo of Far, the
	// caller's speech if any, background noise if Noise, and a little
	// dither. It is as long as Far.
	Near []int16
	// AgentText is the words the agent speaks in Far.
	AgentText string
	// AgentSpan is when the agent's speech starts and ends in Far,
	// measured like UserOnset.
	AgentSpan [2]time.Duration
	// UserText is the words the caller speaks in Near; "" in Echo clips.
	UserText string
	// UserOnset is when the caller's speech starts in Near: the first
	// sample of the caller's audio at or above -45 dBFS, measured on that
	// audio before mixing. -1 in Echo clips.
	UserOnset time.Duration
	// UserEnd is one sample past the last sample of the caller's audio at
	// or above -45 dBFS; -1 in Echo clips.
	UserEnd time.Duration
	// Delay is the echo's delay: the lag of its direct path behind Far.
	Delay time.Duration
	// GainDB is the echo's energy relative to Far's, in dB.
	GainDB float64
	// Noise says whether background noise was added to Near.
	Noise bool
	// NoEcho says the line returns no echo at all (a digital trunk): Near
	// holds no echo of Far, Delay is 0, GainDB is NoEchoGainDB and
	// EchoTaps is nil. An echo-only clip on such a line is noise alone.
	NoEcho bool
	// UserLevelDB is the caller's speech level relative to the agent's,
	// in dB: 0 (the same level) or -6. 0 in Echo clips.
	UserLevelDB float64
	// Voice names the espeak-ng voice of the caller ("" in Echo clips):
	// barge-ins are all in one voice, backchannels in several.
	Voice string

	// The parts of Near, for simulations in which the output may pause
	// (and its echo with it): Near is the echo of Far (Far delayed by
	// Delay, then through EchoTaps, an impulse response with the gain in
	// it) plus User plus Background, before rounding.
	EchoTaps []float64
	// User is the caller's speech on Near's timeline (nil in Echo clips).
	User []int16
	// Background is the noise and dither on Near's timeline.
	Background []int16
}

// Options configures Generate. The zero value asks for the default corpus
// at 16 kHz with seed 0.
type Options struct {
	// Rate is the sample rate: 8000 (band-limited to the phone band,
	// 300-3400 Hz) or 16000. Zero means 16000.
	Rate int
	// Seed drives every random choice (sentences, offsets, room responses,
	// noise): the same Options give byte-identical clips.
	Seed int64
	// CacheDir keeps synthesised utterances between runs, keyed by voice,
	// text, sample rate and tool versions, so that reruns do not run
	// espeak-ng or sox. "" means holdline/corpus under os.UserCacheDir
	// (or under os.TempDir if there is no user cache directory).
	CacheDir string

	// Clip counts; zero means the default.
	EchoSentences int // sentences per echo condition (default 4)
	BargeIns      int // barge-in clips (default 96)
	Backchannels  int // backchannel clips (default 40)
}

// Defaults for Options.
const (
	defaultRate          = 16000
	defaultEchoSentences = 4
	defaultBargeIns      = 144
	defaultBackchannels  = 48
)

// NoEchoGainDB is the GainDB of clips on a line without echo: far below
// anything a line returns, and a finite number so that manifests can hold
// it (--export writes it as gain_db).
const NoEchoGainDB = -120

// The line conditions of barge-in and backchannel clips: a third are on a
// line without echo (a digital trunk), the rest on echoing lines, drawn
// from the delay×gain conditions. Half the callers of each speak at the
// agent's level and half 6 dB quieter (userLevels).
var userLevels = []float64{0, -6}

// The echo conditions: every echo-only combination is generated, and
// barge-in and backchannel clips draw from the same sets.
var (
	echoDelays = []time.Duration{20 * time.Millisecond, 60 * time.Millisecond, 120 * time.Millisecond, 250 * time.Millisecond}
	echoGains  = []float64{-3, -6, -12, -20}
)

// Layout of a clip.
const (
	leadSilence  = 300 * time.Millisecond // Far before the agent speaks
	tailSilence  = 600 * time.Millisecond // Far after the last speech, agent's or user's
	minUserStart = 400 * time.Millisecond // earliest user onset after the agent starts
	minUserLead  = 500 * time.Millisecond // latest user onset before the agent ends
	trimMargin   = 20 * time.Millisecond  // kept around an utterance's speech when trimming
)

// Agent lines: what a restaurant booking agent says, 2.7-3.6 s each.
var agentLines = []string{
	"I can book a table for four at seven tonight.",
	"Your reservation is confirmed for Saturday evening at seven.",
	"We have a quiet corner table available near the garden.",
	"The restaurant opens at five and the kitchen closes at ten.",
	"Would you like me to send a confirmation text to your phone?",
	"I have noted a birthday cake for your table as a surprise.",
	"There is free parking behind the building on Elm Street.",
	"May I have a name and a phone number for the booking please?",
}

// User lines: real interruptions, 1.5-2.5 s each, mostly in words the agent
// does not use.
var userLines = []string{
	"Wait, actually make it Friday instead.",
	"No, I said six people, not four.",
	"Can you hold on a second, my kid is calling.",
	"Sorry, I need to cancel the whole thing.",
	"Hang on, is parking included?",
	"Stop, that is the wrong address.",
	"Could we do eight thirty instead?",
	"Hold on, let me check my calendar.",
	"Actually, my wife wants the patio.",
	"Excuse me, how much does it cost?",
	"No no, the booking is under Martinez.",
	"Just a moment, someone is at the door.",
}

// Backchannels: the caller signalling "go on", not interrupting.
var backchannels = []utterance{
	{"uh-huh", "uh-huh"},
	{"yeah", "yeah"},
	{"okay", "okay"},
	// Phonemes: syllabic m, h, syllabic m.
	{"mm-hmm", "[[m-'hm-]]"},
	{"right", "right"},
}

// backchannelTexts returns the backchannel words as clips record them.
func backchannelTexts() []string {
	out := make([]string, len(backchannels))
	for i, b := range backchannels {
		out[i] = b.text
	}
	return out
}

func plain(text string) utterance { return utterance{text, text} }

// plan is a clip before its audio is made.
type plan struct {
	Clip
	agent utterance
	user  *utterance // nil for Echo
	voice voice      // the user's voice
	// seed and stream select the clip's own random stream (room response,
	// user onset, noise, dither): Options.Seed and a hash of the name.
	seed   int64
	stream uint64
}

// Generate synthesises the corpus described by o. It runs espeak-ng and sox
// for utterances not yet in the cache (errors wrap ErrTools if they are not
// installed) and builds the clips in Go. The order of the returned clips is
// stable: echo clips by delay, gain, noise and sentence, then barge-ins,
// then backchannels.
func Generate(ctx context.Context, o Options) ([]Clip, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	tools, err := findSynthTools(ctx)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.CacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("corpus: cache: %w", err)
	}
	s := &synthesizer{tools: tools, rate: o.Rate, dir: o.CacheDir}

	plans := makePlans(o)

	// Synthesise each distinct utterance once.
	type key struct {
		v voice
		u utterance
	}
	var keys []key
	seen := map[string]bool{}
	add := func(v voice, u utterance) {
		k := v.name + "\x00" + u.speak
		if !seen[k] {
			seen[k] = true
			keys = append(keys, key{v, u})
		}
	}
	for _, p := range plans {
		add(agentVoice, p.agent)
		if p.user != nil {
			add(p.voice, *p.user)
		}
	}
	audio := make(map[string]*speech, len(keys))
	var mu sync.Mutex
	err = parallel(ctx, len(keys), func(i int) error {
		k := keys[i]
		x, err := s.speak(ctx, k.v, k.u)
		if err != nil {
			return err
		}
		sp, err := prepare(x, o.Rate)
		if err != nil {
			return fmt.Errorf("corpus: %s voice, %q: %w", k.v.name, k.u.text, err)
		}
		mu.Lock()
		audio[k.v.name+"\x00"+k.u.speak] = sp
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}

	clips := make([]Clip, len(plans))
	err = parallel(ctx, len(plans), func(i int) error {
		p := plans[i]
		var user *speech
		if p.user != nil {
			user = audio[p.voice.name+"\x00"+p.user.speak]
		}
		clips[i] = build(p, audio[agentVoice.name+"\x00"+p.agent.speak], user)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return clips, nil
}

func (o Options) withDefaults() (Options, error) {
	switch o.Rate {
	case 0:
		o.Rate = defaultRate
	case 8000, 16000:
	default:
		return o, fmt.Errorf("corpus: unsupported rate %d (want 8000 or 16000)", o.Rate)
	}
	if o.EchoSentences < 0 || o.BargeIns < 0 || o.Backchannels < 0 {
		return o, errors.New("corpus: negative clip count")
	}
	if o.EchoSentences == 0 {
		o.EchoSentences = defaultEchoSentences
	}
	if o.BargeIns == 0 {
		o.BargeIns = defaultBargeIns
	}
	if o.Backchannels == 0 {
		o.Backchannels = defaultBackchannels
	}
	if o.CacheDir == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		o.CacheDir = filepath.Join(dir, "holdline", "corpus")
	}
	return o, nil
}

// subRand derives an independent random stream for one purpose from the
// seed, so that changing one clip count does not reshuffle the other kinds.
func subRand(seed int64, purpose string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(purpose))
	return rand.New(rand.NewPCG(uint64(seed), h.Sum64()))
}

// makePlans decides every clip's content and conditions; only the user
// onset, which depends on the agent audio's length, is drawn later (from
// the clip's own stream).
func makePlans(o Options) []plan {
	var plans []plan
	// Each delay×gain condition takes the next EchoSentences agent lines
	// in rotation, the same ones with and without noise, so that the two
	// can be compared clip for clip.
	// A line without echo is one more condition, with noise only (without
	// it the clip is dither alone), twice the sentences.
	for s := range 2 * o.EchoSentences {
		name := fmt.Sprintf("echo/noecho/noise/s%d", s)
		plans = append(plans, plan{
			Clip:  Clip{Name: name, Kind: Echo, Rate: o.Rate, GainDB: NoEchoGainDB, NoEcho: true, Noise: true, UserOnset: -1, UserEnd: -1},
			agent: plain(agentLines[s%len(agentLines)]),
		})
	}
	cond := 0
	for _, d := range echoDelays {
		for _, g := range echoGains {
			for _, noisy := range []bool{false, true} {
				for s := range o.EchoSentences {
					name := fmt.Sprintf("echo/d%d/g%s/%s/s%d", d.Milliseconds(), fmtDB(g), noiseName(noisy), s)
					plans = append(plans, plan{
						Clip:  Clip{Name: name, Kind: Echo, Rate: o.Rate, Delay: d, GainDB: g, Noise: noisy, UserOnset: -1, UserEnd: -1},
						agent: plain(agentLines[(cond+s)%len(agentLines)]),
					})
				}
			}
			cond++
		}
	}

	overlap := func(kind Kind, n int, users []utterance, voices []voice) {
		r := subRand(o.Seed, string(kind)+"/plan")
		// Balanced where it matters: every user utterance, voice and
		// delay×gain condition as often as the count allows, in a seeded
		// order; a third of the clips on a line without echo; in each
		// line condition half the callers 6 dB quieter, alternating so
		// that every delay×gain condition has both levels; noise on
		// exactly half of the clips.
		userOrder := r.Perm(len(users))
		condOrder := r.Perm(len(echoDelays) * len(echoGains))
		lineOrder := r.Perm(n)
		noiseOrder := r.Perm(n)
		var noEchoes, echoes int
		for j := range n {
			u := users[userOrder[j%len(users)]]
			v := voices[j%len(voices)]
			a := r.IntN(len(agentLines))
			noisy := noiseOrder[j] < n/2
			c := Clip{Kind: kind, Rate: o.Rate, Noise: noisy, UserText: u.text, Voice: v.name}
			var line string
			if lineOrder[j] < n/3 {
				c.NoEcho, c.GainDB = true, NoEchoGainDB
				c.UserLevelDB = userLevels[noEchoes%len(userLevels)]
				noEchoes++
				line = "noecho"
			} else {
				k := condOrder[echoes%len(condOrder)]
				c.Delay, c.GainDB = echoDelays[k/len(echoGains)], echoGains[k%len(echoGains)]
				c.UserLevelDB = userLevels[(echoes+echoes/len(condOrder))%len(userLevels)]
				echoes++
				line = fmt.Sprintf("d%d/g%s", c.Delay.Milliseconds(), fmtDB(c.GainDB))
			}
			c.Name = fmt.Sprintf("%s/%03d/a%d/%s/%s/u%s", kind, j, a, line, noiseName(noisy), fmtDB(c.UserLevelDB))
			if len(voices) > 1 {
				c.Name += "/" + v.name
			}
			plans = append(plans, plan{
				Clip:  c,
				agent: plain(agentLines[a]),
				user:  &u,
				voice: v,
			})
		}
	}
	users := make([]utterance, len(userLines))
	for j, l := range userLines {
		users[j] = plain(l)
	}
	overlap(BargeIn, o.BargeIns, users, []voice{userVoice})
	overlap(Backchannel, o.Backchannels, backchannels, backchannelVoices)

	for j := range plans {
		p := &plans[j]
		p.AgentText = p.agent.text
		h := fnv.New64a()
		h.Write([]byte(p.Name))
		p.seed, p.stream = o.Seed, h.Sum64()
	}
	return plans
}

func fmtDB(g float64) string { return fmt.Sprintf("%g", g) }

func noiseName(on bool) string {
	if on {
		return "noise"
	}
	return "clean"
}

// speech is a synthesised utterance ready to mix: at speechLevelDB active
// RMS, trimmed to its speech plus trimMargin each side.
type speech struct {
	x []float64
	// on, off: the first sample at or above the onset threshold and one
	// past the last.
	on, off int
}

func prepare(x []int16, rate int) (*speech, error) {
	f := toFloat(x)
	a := activeRMS(f, rate)
	if a == 0 {
		return nil, errors.New("synthesised silence")
	}
	scale(f, dbToAmp(speechLevelDB)/a)
	on, off, ok := span(f, onsetThreshold)
	if !ok {
		return nil, errors.New("no sample above the onset threshold")
	}
	m := samples(rate, trimMargin)
	lo, hi := max(0, on-m), min(len(f), off+m)
	return &speech{x: f[lo:hi], on: on - lo, off: off - lo}, nil
}

// build makes a clip's audio from its plan.
func build(p plan, agent, user *speech) Clip {
	c := p.Clip
	rate := c.Rate
	r := rand.New(rand.NewPCG(uint64(p.seed), p.stream))

	// The agent's speech starts leadSilence into Far; Far (and Near) end
	// tailSilence after the last speech, the agent's or the user's.
	lead := samples(rate, leadSilence)
	tail := samples(rate, tailSilence)
	agentStart := lead - agent.on
	agentOff := lead + agent.off - agent.on
	n := agentOff + tail

	// A caller quieter than the agent: the speech scaled, its onset and
	// end measured anew (a quieter utterance crosses the onset threshold
	// later and stops crossing it sooner).
	if user != nil && c.UserLevelDB != 0 {
		x := make([]float64, len(user.x))
		copy(x, user.x)
		scale(x, math.Pow(10, c.UserLevelDB/20))
		on, off, _ := span(x, onsetThreshold)
		user = &speech{x: x, on: on, off: off}
	}

	// The user's speech starts somewhere between 0.4 s into the agent's
	// and 0.5 s before its end.
	userStart := 0
	if user != nil {
		lo := lead + samples(rate, minUserStart)
		hi := max(lo, agentOff-samples(rate, minUserLead))
		userOn := lo + r.IntN(hi-lo+1)
		userStart = userOn - user.on
		n = max(n, userOn+user.off-user.on+tail)
	}

	farF := make([]float64, n)
	copy(farF[agentStart:], agent.x)
	c.Far = toInt16(farF)
	if on, off, ok := span16(c.Far, onsetThreshold); ok {
		c.AgentSpan = [2]time.Duration{dur(rate, on), dur(rate, off)}
	}

	room := roomResponse(r, rate)
	near := make([]float64, n)
	if !c.NoEcho {
		near = echoOf(c.Far, room, samples(rate, c.Delay), c.GainDB, n)
		c.EchoTaps = echoTaps(c.Far, room, c.GainDB)
	}
	other := make([]float64, n) // everything but the echo
	if user != nil {
		u := make([]float64, n)
		copy(u[userStart:], user.x)
		on, off, _ := span(u, onsetThreshold)
		c.UserOnset, c.UserEnd = dur(rate, on), dur(rate, off)
		c.User = toInt16(u)
		add(other, u)
	}
	bg := make([]float64, n)
	if c.Noise {
		add(bg, noise(r, n, rate, noiseLevelDB))
	}
	add(bg, dither(r, n, ditherLevelDB))
	c.Background = toInt16(bg)
	add(other, bg)
	add(near, other)
	c.Near = toInt16(near)
	return c
}

func add(dst, src []float64) {
	for i, v := range src {
		dst[i] += v
	}
}

// parallel runs f(0..n-1) on up to GOMAXPROCS goroutines, stopping at the
// first error or when ctx is done.
func parallel(ctx context.Context, n int, f func(i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		next     = make(chan int)
	)
	for range min(n, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
				}
			}
		}()
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

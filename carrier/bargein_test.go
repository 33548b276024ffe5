package carrier_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdline/holdline/carrier/carriertest"
	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/tts/espeak"
)

const longAnswer = "Thanks for calling Holdline Bistro. We are open from noon until eleven every day, " +
	"and on weekends we serve brunch from ten. I can check availability, book a table, or change a booking you already have."

// callerVoice is espeak-ng's caller voice (not the agent's) saying text,
// at 8 kHz.
func callerVoice(t testing.TB, text string) []int16 {
	t.Helper()
	out, err := exec.Command("espeak-ng", "-v", "en-us+edward", "-p", "35", "--stdout", text).Output()
	if err != nil {
		t.Skipf("espeak-ng: %v", err)
	}
	pcm, rate, err := media.ReadWAV(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := media.NewResampler(rate, 8000)
	if err != nil {
		t.Fatal(err)
	}
	pcm = rs.Process(nil, pcm)
	// The onset is the voice's, not espeak-ng's lead-in of silence.
	for i, v := range pcm {
		if v > 500 || v < -500 {
			return pcm[i:]
		}
	}
	return pcm
}

// speakingAgent says longAnswer in espeak-ng's voice at 8 kHz as soon as
// the call is up.
func speakingAgent(rec *recorder) runtime.AgentFunc {
	return func(context.Context) (*runtime.Agent, func(), error) {
		voice, err := espeak.New(espeak.WithSampleRate(8000))
		if err != nil {
			return nil, nil, err
		}
		model := scripted.NewLLMFunc(func(llm.Request) scripted.Response {
			return scripted.Response{TTFB: 50 * time.Millisecond, Text: longAnswer}
		})
		return &runtime.Agent{Name: "phone", Model: model, TTS: voice, STT: scripted.NewSTT(),
			OnEnter: func(ctx context.Context, s *runtime.Session) error {
				rec.attach(s)
				return s.GenerateReply(ctx, "")
			}}, nil, nil
	}
}

// markEpoch is the epoch a transport's mark is of ("h<epoch>.<n>").
func markEpoch(name string) uint64 {
	e, _, _ := strings.Cut(strings.TrimPrefix(name, "h"), ".")
	n, _ := strconv.ParseUint(e, 10, 64)
	return n
}

// markedPlayed is how much of epoch the phone returned as played: the
// last played mark of the epoch, counted from where the epoch's audio
// began (the previous epoch's last mark; silence is not sent).
func markedPlayed(marks []carriertest.Mark, epoch uint64) time.Duration {
	var start, end int64
	for _, m := range marks {
		e := markEpoch(m.Name)
		if e < epoch {
			start = max(start, m.Pos)
		}
		if e == epoch && m.Played {
			end = max(end, m.Pos)
		}
	}
	if end < start {
		return 0
	}
	return time.Duration(end-start) * time.Second / 8000
}

// bargeIn is one trial: the caller talks over the agent's answer on an
// echoing line.
type bargeIn struct {
	// toClear is from the caller's onset to the clear at the phone; -1:
	// none came, because nothing was left to clear (the agent was between
	// phrases, all it had sent played): silent is then when its last audio
	// came.
	toClear     time.Duration
	silent      time.Duration
	earlyClears int           // clears before the caller spoke: the echo cut the agent
	truncated   time.Duration // what the context says was played
	marked      time.Duration // what the phone marked played
	text        string        // the context's truncated answer
	ok          bool
	why         string
}

func runBargeIn(t *testing.T, voice []int16, after time.Duration) bargeIn {
	return runBargeInOn(t, carriertest.Twilio, voice, after)
}

// runBargeInOn is one trial through carrier c's routes and phone.
func runBargeInOn(t *testing.T, c carriertest.Carrier, voice []int16, after time.Duration) bargeIn {
	rec := &recorder{}
	r, cfg := newCarrierRig(t, speakingAgent(rec), c)
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	cfg.EchoDelay, cfg.EchoGainDB = 120*time.Millisecond, -6
	p := dialScripted(t, ctx, r, cfg)
	res := bargeIn{toClear: -1}
	for p.FirstSound().IsZero() {
		if ctx.Err() != nil {
			res.why = "the agent never spoke"
			return res
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Until(p.FirstSound().Add(after)))
	res.earlyClears = len(p.Clears())
	p.Say(voice)
	for {
		if _, ok := rec.first(events.PlayoutTruncate); ok {
			break
		}
		if _, ok := rec.first(events.PlayoutDone); ok || ctx.Err() != nil {
			res.why = "the caller did not interrupt the agent"
			return res
		}
		time.Sleep(10 * time.Millisecond)
	}
	onset := p.Onset()
	for _, c := range p.Clears() {
		if c.After(onset) {
			res.toClear = c.Sub(onset)
			break
		}
	}
	e, _ := rec.first(events.PlayoutTruncate)
	res.truncated, res.text = e.Played, e.Text
	res.silent = res.toClear
	if res.toClear < 0 {
		res.silent = max(0, p.LastMediaBefore(e.Time.Add(time.Second)).Sub(onset))
	}
	// Marks in flight settle within a round trip on this machine.
	time.Sleep(50 * time.Millisecond)
	res.marked = markedPlayed(p.Marks(), e.Epoch)
	rec.mu.Lock()
	s := rec.sess[0]
	rec.mu.Unlock()
	cc, err := s.ChatContext(ctx)
	if err != nil {
		res.why = err.Error()
		return res
	}
	var inContext string
	for _, it := range cc.Items {
		if it.Role == llm.RoleAssistant && it.Interrupted {
			inContext = it.Text
		}
	}
	switch {
	case res.toClear < 0 && res.silent > time.Second:
		res.why = "no clear after the caller spoke, and the agent went on"
	case res.earlyClears > 0:
		res.why = fmt.Sprintf("%d clears before the caller spoke: the agent's echo cut it", res.earlyClears)
	case res.truncated != res.marked:
		res.why = fmt.Sprintf("the context has %v played, the phone marked %v", res.truncated, res.marked)
	case inContext != res.text:
		res.why = fmt.Sprintf("the context says %q, the truncation %q", inContext, res.text)
	case !strings.HasPrefix(longAnswer, strings.TrimSuffix(res.text, "…")) && res.text != "":
		res.why = fmt.Sprintf("the played text %q is not the answer's beginning", res.text)
	case len(p.Refused()) > 0:
		res.why = fmt.Sprintf("frames the carrier would refuse: %q", p.Refused())
	default:
		res.ok = true
	}
	return res
}

// A caller who talks over the agent's long answer on a line that echoes
// it (120 ms, -6 dB, the echo canceller on) gets the carrier's buffer
// cleared at once, and the context holds what the carrier marked played,
// no more. make test runs 3 trials; HOLDLINE_TWILIO_BARGEIN=full runs 20
// and logs p50/p95:
//
//	HOLDLINE_TWILIO_BARGEIN=full go test -run TestBargeInThroughTwilio -v ./carrier
func TestBargeInThroughTwilio(t *testing.T) {
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		t.Skip("espeak-ng is missing (make test installs it)")
	}
	voice := callerVoice(t, "Wait, I want to change the time of my booking please.")
	trials, parallel := 3, 1
	if os.Getenv("HOLDLINE_TWILIO_BARGEIN") == "full" {
		trials, parallel = 20, 4
	}
	results := make([]bargeIn, trials)
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	for i := range trials {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			// Into the answer at 1.5 s to 4.35 s: different words cut.
			results[i] = runBargeIn(t, voice, 1500*time.Millisecond+time.Duration(i)*150*time.Millisecond)
		})
	}
	wg.Wait()
	var lat, silent []time.Duration
	var b strings.Builder
	fails := 0
	for i, r := range results {
		clr := "none"
		if r.toClear >= 0 {
			clr = r.toClear.Round(time.Millisecond).String()
		}
		fmt.Fprintf(&b, "%2d onset→clear %-8s silent at the phone %-8v context played %-8v marked played %-8v %q", i, clr, r.silent.Round(time.Millisecond), r.truncated, r.marked, r.text)
		if !r.ok {
			fails++
			fmt.Fprintf(&b, "  FAIL: %s", r.why)
		}
		b.WriteByte('\n')
		if r.toClear >= 0 {
			lat = append(lat, r.toClear)
		}
		if r.ok {
			silent = append(silent, r.silent)
		}
	}
	slices.Sort(lat)
	slices.Sort(silent)
	t.Logf("barge-in through the Twilio path, %d trials (echo 120 ms -6 dB, canceller on):\n%sonset→clear p50 %v p95 %v (%d clears); onset→agent silent at the phone p50 %v p95 %v; truncation truth %d/%d",
		trials, b.String(), pct(lat, 50).Round(time.Millisecond), pct(lat, 95).Round(time.Millisecond), len(lat),
		pct(silent, 50).Round(time.Millisecond), pct(silent, 95).Round(time.Millisecond), trials-fails, trials)
	if fails > 0 {
		t.Errorf("%d of %d trials failed", fails, trials)
	}
}

func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return -1
	}
	i := (len(sorted)*p + 99) / 100
	return sorted[max(0, min(len(sorted)-1, i-1))]
}

package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/internal/need"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/server"
	"github.com/holdline/holdline/vad/corpus"
)

// browserResult is what test/browser/run.mjs prints.
type browserResult struct {
	OK    bool     `json:"ok"`
	Error string   `json:"error"`
	Evts  []string `json:"events"`

	Greeting          string  `json:"greeting"`
	GreetingPeakRMS   float64 `json:"greetingPeakRMS"`
	Heard             string  `json:"heard"`
	BookState         string  `json:"bookState"`
	Reply             string  `json:"reply"`
	Resumed           bool    `json:"resumed"`
	SameSession       bool    `json:"sameSession"`
	AfterResume       string  `json:"afterResume"`
	AfterResumePeak   float64 `json:"afterResumePeakRMS"`
	BookTableRuns     int     `json:"bookTableRuns"`
	SessionStarts     int     `json:"sessionStarts"`
	TransportLost     int     `json:"transportLost"`
	TransportRestored int     `json:"transportRestored"`

	MoveMs    int    `json:"moveMs"`
	MovedText string `json:"movedText"`

	Gaps      []int `json:"gapsMs"`
	Silences  []int `json:"silencesMs"`
	Cuts      int   `json:"cuts"`
	TrialsRun int   `json:"trialsRun"`

	Latencies      []int `json:"latenciesMs"`
	StatsLatencies []int `json:"statsLatenciesMs"`
	Discarded      int   `json:"discarded"`
	P50            int   `json:"p50"`
	P95            int   `json:"p95"`

	// The relay scenario: each session.
	Relay []struct {
		Connected               bool
		ConnectMs               int
		Session, Error          string
		GreetingPeakRMS         float64
		Local, Remote           string // the selected pair's candidate types
		RelayProtocol           string
		Heard, BookState, Reply string
	}

	// The page scenario.
	Missing, Wrong, Right pageOutcome
	Storage               struct{ Session, Local *string }
	Limit                 struct {
		Sent       bool
		Status     string
		RefusedTag string
		Pending    int
		HugeTurns  int
	}
	CheckpointsHidden int
	CheckpointsShown  int
	CutOff            []struct{ Kind, Label, Detail string }
	EmptyCutOff       int
	EmptyCutOffAll    int `json:"emptyCutOffShowAll"`
	SilentCuts        int
	Reloads           int
	Truncations       []string
	TokenAfterReload  bool
	Ended             struct {
		Live              int
		LastTag, LastText string
		Logged            []string
	}
}

// pageOutcome is what the page shows after a connect.
type pageOutcome struct {
	Error, State, Problem, Note, Status string
}

// needBrowser returns the paths the browser tests need, or skips (fails
// under make test, which installs them).
func needBrowser(t *testing.T) (node, script string) {
	t.Helper()
	for _, bin := range []string{"espeak-ng", "sox"} {
		if _, err := exec.LookPath(bin); err != nil {
			missingForBrowser(t, bin)
		}
	}
	node, dir := needChromium(t)
	return node, filepath.Join(dir, "run.mjs")
}

// needChromium returns node and the directory of the browser scripts
// when Chromium and playwright-core are there, or skips (fails under
// make test, which installs them): for pages that need no caller's voice.
func needChromium(t *testing.T) (node, dir string) {
	t.Helper()
	if _, err := exec.LookPath("/usr/bin/chromium"); err != nil {
		missingForBrowser(t, "/usr/bin/chromium")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missingForBrowser(t, "node")
	}
	dir, _ = filepath.Abs("../test/browser")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core")); err != nil {
		missingForBrowser(t, "playwright-core (npm ci in test/browser)")
	}
	return node, dir
}

func missingForBrowser(t *testing.T, what string) {
	t.Helper()
	need.Missingf(t, "%s is missing: make test-deps installs it", what)
}

// callerWAV speaks text with espeak-ng as a 48 kHz WAV for Chromium's fake
// microphone, with silence before and after, so it loops as a caller who
// says it and waits.
func callerWAV(t *testing.T, text string, before, after float64) string {
	t.Helper()
	dir := t.TempDir()
	raw, wav := filepath.Join(dir, "raw.wav"), filepath.Join(dir, "caller.wav")
	if out, err := exec.Command("espeak-ng", "-v", "en-us+edward", "-w", raw, text).CombinedOutput(); err != nil {
		t.Fatalf("espeak-ng: %v: %s", err, out)
	}
	if out, err := exec.Command("sox", raw, "-r", "48000", "-c", "1", "-b", "16", wav, "pad", ftoa(before), ftoa(after)).CombinedOutput(); err != nil {
		t.Fatalf("sox: %v: %s", err, out)
	}
	return wav
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// serveForBrowser starts holdline serve on this machine's engines and
// returns its URL.
func serveForBrowser(t *testing.T, ctx context.Context) string {
	t.Helper()
	return serveForBrowserWith(t, ctx, "")
}

// serveForBrowserWith is serveForBrowser with HOLDLINE_TOKEN set to token
// and more flags for serve.
func serveForBrowserWith(t *testing.T, ctx context.Context, token string, flags ...string) string {
	t.Helper()
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("HOLDLINE_TOKEN", token)
	runCtx, stop := context.WithCancel(ctx)
	outR, outW := io.Pipe()
	// Read by the cleanup while a carrier stream's handler, which outlives
	// serve's return by a moment, may still write it.
	stderr := &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(runCtx, append([]string{"serve", "--agent", "booking", "--http", "127.0.0.1:0"}, flags...), strings.NewReader(""), outW, stderr)
		outW.Close()
	}()
	t.Cleanup(func() {
		stop()
		<-done
		if t.Failed() {
			t.Logf("serve's log:\n%s", stderr.String())
		}
	})
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatalf("serve printed nothing: %v", err)
	}
	go io.Copy(io.Discard, outR)
	i := strings.Index(line, "http://")
	if i < 0 {
		t.Fatalf("serve printed %q", line)
	}
	return strings.TrimSuffix(strings.TrimSpace(line[i:]), "/")
}

func runBrowser(t *testing.T, ctx context.Context, node, script string, args ...string) browserResult {
	t.Helper()
	cmd := exec.CommandContext(ctx, node, append([]string{script}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("browser log:\n%s", stderr.String())
	var res browserResult
	if jerr := json.Unmarshal(stdout.Bytes(), &res); jerr != nil {
		t.Fatalf("browser run: %v; output %q", err, stdout.String())
	}
	if !res.OK {
		t.Fatalf("in the browser: %s\nevents:\n%s", res.Error, strings.Join(res.Evts, "\n"))
	}
	return res
}

// In headless Chromium with a fake microphone playing an espeak-ng caller,
// on this machine's engines, tried as a new user would: the page connects,
// the greeting's audio arrives, the spoken request is recognised and
// booked once, and a reload resumes the same session, which answers again.
func TestBrowserBooksAndResumesAfterAReload(t *testing.T) {
	node, script := needBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	url := serveForBrowser(t, ctx)
	out := t.ArtifactDir()
	wav := callerWAV(t, "Book a table for two at seven.", 1.5, 4)
	r := runBrowser(t, ctx, node, script, "booking", url, wav, out)
	t.Logf("greeting peak RMS %.3f; heard %q; reply %q; after the reload %q (peak RMS %.3f); screenshots in %s",
		r.GreetingPeakRMS, r.Heard, r.Reply, r.AfterResume, r.AfterResumePeak, out)
	if r.GreetingPeakRMS < 0.02 {
		t.Errorf("the greeting's audio peaked at RMS %.3f at the page: not heard", r.GreetingPeakRMS)
	}
	if r.Heard != "book a table for two at seven" {
		t.Errorf("the caller was heard as %q", r.Heard)
	}
	if r.BookState != "succeeded" || r.BookTableRuns != 1 {
		t.Errorf("book_table: %q, ran %d times; want succeeded, once", r.BookState, r.BookTableRuns)
	}
	if !r.Resumed || !r.SameSession || r.SessionStarts != 1 {
		t.Errorf("after the reload: resumed %v, same session %v, %d session starts", r.Resumed, r.SameSession, r.SessionStarts)
	}
	if r.TransportLost != 1 || r.TransportRestored != 1 {
		t.Errorf("transport lost %d, restored %d; want once each", r.TransportLost, r.TransportRestored)
	}
	if r.AfterResume == "" || r.AfterResumePeak < 0.02 {
		t.Errorf("no spoken answer after the resume: %q, peak RMS %.3f", r.AfterResume, r.AfterResumePeak)
	}
	for _, png := range []string{"booking.png", "resumed.png", "phone.png"} {
		if _, err := os.Stat(filepath.Join(out, png)); err != nil {
			t.Errorf("screenshot: %v", err)
		}
	}
}

// Twenty times, the browser's caller says "Wait." while the agent speaks;
// the time from the caller's speech onset to the agent's audio stopping is
// measured in the page. The figures are logged (and reported with the
// issue); the test checks that every interruption stopped the agent.
func TestBrowserBargeInStopsTheAgent(t *testing.T) {
	node, script := needBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	url := serveForBrowser(t, ctx)
	out := t.ArtifactDir()
	wav := callerWAV(t, "Wait.", 0.3, 0.9)
	r := runBrowser(t, ctx, node, script, "bargein", url, wav, out, "20")
	sorted := slices.Sorted(slices.Values(r.Latencies))
	t.Logf("speech onset -> agent audio stopped, at the page (Web Audio): p50 %d ms, p95 %d ms, all %v (%d trials discarded: the agent was between words at the onset)",
		r.P50, r.P95, sorted, r.Discarded)
	t.Logf("the same by WebRTC's statistics (counted at the headless playout device): %v", r.StatsLatencies)
	if len(r.Latencies) != 20 {
		t.Fatalf("%d trials measured; want 20", len(r.Latencies))
	}
	if worst := sorted[len(sorted)-1]; worst > 1500 {
		t.Errorf("the agent went on for %d ms over the caller: it was not interrupted", worst)
	}
}

// soundsWAV writes sounds, 16 kHz, each after a pause, as a 48 kHz WAV for
// Chromium's fake microphone: each unmute at a pause plays the next one.
func soundsWAV(t *testing.T, sounds [][]int16) string {
	t.Helper()
	var pcm []int16
	pause := make([]int16, media.Rate16k)
	for _, s := range sounds {
		pcm = append(append(pcm, pause...), s...)
	}
	pcm = append(pcm, pause...)
	dir := t.TempDir()
	raw, wav := filepath.Join(dir, "raw.wav"), filepath.Join(dir, "sounds.wav")
	var b bytes.Buffer
	if err := media.WriteWAV(&b, pcm, media.Rate16k); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(raw, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("sox", raw, "-r", "48000", "-c", "1", "-b", "16", wav).CombinedOutput(); err != nil {
		t.Fatalf("sox: %v: %s", err, out)
	}
	return wav
}

// browserTrials is how many short sounds each browser run makes:
// HOLDLINE_BROWSER_TRIALS, or def.
func browserTrials(t *testing.T, def int) int {
	t.Helper()
	v := os.Getenv("HOLDLINE_BROWSER_TRIALS")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("HOLDLINE_BROWSER_TRIALS=%q: want a positive number", v)
	}
	return n
}

// In the browser, on this machine's engines, the caller says "uh-huh",
// "yeah", "okay", "mm-hmm" or "right" (the corpus's backchannels, 0.4-0.8 s,
// in three voices), or coughs, over a long answer: at most one in ten cuts
// the answer; the agent is back within 500 ms of the sound's end (p95), and
// a cough never leaves a second of silence, measured in the page.
// HOLDLINE_BROWSER_TRIALS=20 runs 20 of each (make test: 6 and 3).
func TestBrowserBackchannelsAndCoughsDoNotCutTheAgent(t *testing.T) {
	node, script := needBrowser(t)
	clips, err := corpus.Generate(context.Background(), corpus.Options{Rate: media.Rate16k, EchoSentences: 1, BargeIns: 1, Backchannels: 15})
	if err != nil {
		t.Skipf("corpus: %v", err)
	}
	var backchannels [][]int16
	for _, c := range clips {
		if c.Kind == corpus.Backchannel && c.UserLevelDB == 0 {
			at := func(d time.Duration) int { return int(d.Seconds() * media.Rate16k) }
			backchannels = append(backchannels, c.User[at(c.UserOnset):at(c.UserEnd)])
		}
	}
	cough := corpus.Cough(media.Rate16k)
	for _, tc := range []struct {
		name   string
		sounds [][]int16
		trials int
	}{
		{"backchannels", backchannels, browserTrials(t, 6)},
		{"coughs", [][]int16{cough, cough, cough}, max(browserTrials(t, 3)/2, 3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			url := serveForBrowser(t, ctx)
			r := runBrowser(t, ctx, node, script, "backchannel", url, soundsWAV(t, tc.sounds), t.ArtifactDir(), strconv.Itoa(tc.trials))
			gaps, silences := slices.Sorted(slices.Values(r.Gaps)), slices.Sorted(slices.Values(r.Silences))
			pct := func(xs []int, p float64) int {
				if len(xs) == 0 {
					return -1
				}
				return xs[min(len(xs)-1, int(math.Ceil(p*float64(len(xs))))-1)]
			}
			t.Logf("%s: %d of %d cut the answer (%d discarded: the agent was between words); resume gap p50 %d ms, p95 %d ms, all %v; longest silence p50 %d ms, max %d ms",
				tc.name, r.Cuts, r.TrialsRun, r.Discarded, pct(gaps, 0.5), pct(gaps, 0.95), gaps, pct(silences, 0.5), pct(silences, 1))
			if r.Cuts*10 > r.TrialsRun {
				t.Errorf("%d of %d %s cut the agent's answer; want at most 1 in 10", r.Cuts, r.TrialsRun, tc.name)
			}
			if p := pct(gaps, 0.95); p > 500 {
				t.Errorf("resume gap p95 %d ms; want at most 500 ms", p)
			}
			// A backchannel is a pause as long as itself plus the gap; a
			// cough must never leave the caller a second of dead air.
			if m := pct(silences, 1); tc.name == "coughs" && m > 1000 {
				t.Errorf("a silence of %d ms at the page; want none over a second", m)
			}
		})
	}
}

// The reference page, in headless Chromium on a server that wants a token,
// as a newcomer meets it: a missing token and a wrong one are told apart,
// the right one is kept for the tab only (a reload still has it), typed
// text over the server's limit is shown refused and is no turn, checkpoint
// lines show only with "Show all", a reload mid-answer leaves no empty
// "Agent cut off" line, and End call closes the agent's open bubble and
// logs the end.
func TestBrowserPageTellsTokensApartRefusesLongTextAndEndsCleanly(t *testing.T) {
	node, script := needBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const token = "page-test-token"
	// A store, for the checkpoint lines.
	url := serveForBrowserWith(t, ctx, token, "--store", "file:"+filepath.Join(t.TempDir(), "sessions.db"))
	out := t.ArtifactDir()
	wav := callerWAV(t, "Hello.", 1, 4)
	r := runBrowser(t, ctx, node, script, "page", url, wav, out, token)

	if r.Missing.State != "error" || r.Missing.Problem != "missing" || !strings.Contains(r.Missing.Note, "needs an access token") {
		t.Errorf("without a token the page shows %+v; want the missing-token message", r.Missing)
	}
	if r.Wrong.State != "error" || r.Wrong.Problem != "wrong" || !strings.Contains(r.Wrong.Note, "does not match") {
		t.Errorf("with a wrong token the page shows %+v; want the wrong-token message", r.Wrong)
	}
	if r.Right.State != "connected" || r.Right.Problem != "" || r.Right.Error != "" {
		t.Errorf("with the token the page shows %+v; want connected", r.Right)
	}
	if r.Storage.Session == nil || *r.Storage.Session != token || r.Storage.Local != nil {
		t.Errorf("token storage: sessionStorage %v, localStorage %v; want the tab's sessionStorage only", r.Storage.Session, r.Storage.Local)
	}
	if !r.TokenAfterReload {
		t.Error("the token was gone after a reload of the same tab")
	}
	limit := strconv.Itoa(server.MaxTextBytes)
	if !r.Limit.Sent || r.Limit.RefusedTag != "not sent" || r.Limit.Pending != 0 || r.Limit.HugeTurns != 0 || !strings.Contains(r.Limit.Status, limit) {
		t.Errorf("200,000 typed characters: %+v; want refused, shown not sent with the limit %s, no turn", r.Limit, limit)
	}
	if r.CheckpointsHidden != 0 || r.CheckpointsShown == 0 {
		t.Errorf("checkpoint lines: %d shown by default, %d with Show all; want none, then some", r.CheckpointsHidden, r.CheckpointsShown)
	}
	// The reload comes at the model request, before the answer's audio:
	// the turn is cut with nothing played, which showed as an empty
	// "Agent cut off" line.
	t.Logf("after %d reloads: %d turns cut before any audio; truncations %q", r.Reloads, r.SilentCuts, r.Truncations)
	if r.SilentCuts == 0 {
		t.Errorf("the reload did not cut a turn before its audio (truncations %q): the case is not exercised", r.Truncations)
	}
	if r.EmptyCutOff != 0 || r.EmptyCutOffAll != 0 {
		t.Errorf("empty \"Agent cut off\" lines after the reload: %d shown, %d with Show all: %+v", r.EmptyCutOff, r.EmptyCutOffAll, r.CutOff)
	}
	if r.Ended.Live != 0 || r.Ended.LastTag != "call ended" || r.Ended.LastText == "" || len(r.Ended.Logged) != 1 {
		t.Errorf("after End call: %+v; want the agent's bubble closed with what it said, tagged call ended, and the end logged once", r.Ended)
	}
}

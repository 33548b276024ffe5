package cli

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	protologger "github.com/livekit/protocol/logger"
	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/holdline/holdline/internal/livekittest"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/openaitest"
	"github.com/holdline/holdline/runtime"
)

// bench latency --runtime livekit answers the caller with a LiveKit Agents
// for Node agent (test/latency-livekit/agent.mjs) instead of Holdline: the
// same fake OpenAI-compatible server with the same latencies and the same
// transcriber, the same caller lines in espeak-ng's voice, and the same
// measurement (from the end of the caller's speech to the first loud packet
// of the agent's audio the caller hears). livekit-server runs on 127.0.0.1
// only; the caller joins its room with server-sdk-go.

// benchRuntimes are what --runtime takes.
var benchRuntimes = []string{"holdline", "livekit", "both"}

const (
	// livekitServerVersion is the livekit-server built for the bench.
	livekitServerVersion = livekittest.Version
	// livekitAgentsVersion is the @livekit/agents test/latency-livekit pins.
	livekitAgentsVersion = "1.9.0"
	// livekitAgentDir holds the agent, its package.json and lock.
	livekitAgentDir = "test/latency-livekit"
	// The key pair the bench's livekit-server takes (it wants a secret of
	// 32 characters or more).
	livekitAPIKey    = "holdlinebench"
	livekitAPISecret = "holdline-bench-secret-0123456789abcdef"
	// livekitStart bounds each start-up wait: the server, a worker's
	// registration, the agent joining the room and greeting.
	livekitStart = 60 * time.Second
	// livekitCooldown is the pause after a LiveKit call, once its job has
	// ended, so that the job process's exit and the worker's pool are not
	// still busy on the two cores when the next round is measured.
	livekitCooldown = 2 * time.Second
)

// benchSetup is what benchLatencyCmd has made ready before it knows which
// runtime answers: the settings, the caller's lines and voice, the fake
// server and its transcriber's line.
type benchSetup struct {
	set     latencySettings
	lines   []string
	speech  map[string][]int16
	fake    *openaitest.Server
	setLine func(string)
	fn      runtime.AgentFunc
	name    string
	note    string
	logger  *slog.Logger
	asJSON  bool
	verbose bool
}

// benchRow is one runtime and configuration the comparison measures.
type benchRow struct {
	runtime string // holdline or livekit
	label   string
	// speculate: Holdline's speculation, or LiveKit's preemptive
	// generation.
	speculate bool
}

func (r benchRow) key() string {
	if r.runtime == "holdline" {
		return "holdline"
	}
	if r.speculate {
		return "livekit-preemptive"
	}
	return "livekit"
}

// benchComparison is what --runtime livekit and --runtime both print, as
// a table or as JSON.
type benchComparison struct {
	Agent string `json:"agent"`
	Cores int    `json:"cores"`
	// Turns is the turns asked for each runtime; they were spoken in
	// rounds of RoundTurns, one call a round, the runtimes in turn.
	Turns      int `json:"turns"`
	RoundTurns int `json:"round_turns"`
	// Settings are the latencies the providers were given, the detector's
	// silence and the endpointing, in ms.
	Settings map[string]float64 `json:"settings_ms"`
	Note     string             `json:"note,omitempty"`
	Runtimes []runtimeReport    `json:"runtimes"`
}

// runtimeReport is one runtime's measurements.
type runtimeReport struct {
	Runtime string `json:"runtime"` // holdline or livekit
	Label   string `json:"label"`
	// Version is LiveKit Agents' and livekit-server's, for LiveKit.
	Version string `json:"version,omitempty"`
	// Speculate: the model was asked before the caller's turn ended
	// (Holdline's speculation, LiveKit's preemptive generation).
	Speculate bool `json:"speculate"`
	// Endpointing says when the runtime ends the caller's turn with the
	// settings given; FloorRule how the floor follows from it.
	Endpointing string `json:"endpointing"`
	FloorRule   string `json:"floor_rule"`
	Turns       int    `json:"turns"`
	Measured    int    `json:"measured"`
	// VoiceToVoice is from the end of the caller's speech to the agent's
	// first audio heard; Floor the least the providers and the runtime's
	// own endpointing allow; Share the difference, turn by turn.
	VoiceToVoice latencyStats   `json:"voice_to_voice"`
	Floor        latencyStats   `json:"floor"`
	Share        latencyStats   `json:"share"`
	Stages       []latencyStage `json:"stages"`
	PerTurn      []latencyTurn  `json:"per_turn"`
}

// benchLatencyAcross runs bench latency for --runtime livekit or both.
func (c *cli) benchLatencyAcross(ctx context.Context, which string, b benchSetup) error {
	if b.name != "booking" {
		return fmt.Errorf("bench latency --runtime %s: the LiveKit agent (%s/agent.mjs) is the booking agent; --agent %s has no LiveKit twin", which, livekitAgentDir, b.name)
	}
	var rows []benchRow
	if which == "both" {
		rows = []benchRow{
			{"holdline", holdlineLabel(true), true},
			{"livekit", livekitLabel(false), false},
			{"livekit", livekitLabel(true), true},
		}
	} else {
		rows = []benchRow{{"livekit", livekitLabel(b.set.speculate), b.set.speculate}}
	}
	// Every call is one whole conversation: the caller's lines, once.
	roundTurns := len(b.lines)

	// LiveKit: the server, then a worker per configuration, each started
	// once and kept for every round; all stopped by PID on the way out.
	bin, err := livekittest.Binary(ctx, c.stderr)
	if err != nil {
		return err
	}
	agentDir, err := livekitAgentInstall(ctx, c.stderr)
	if err != nil {
		return err
	}
	// server-sdk-go logs through our logger, at its level.
	lksdk.SetLogger(protologger.LogRLogger(logr.FromSlogHandler(b.logger.Handler())))
	work, err := os.MkdirTemp("", "holdline-bench-livekit-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	var logs io.Writer = io.Discard
	if b.verbose {
		logs = c.stderr
	}
	srv, err := livekittest.Start(ctx, bin, work, logs, livekittest.WithKey(livekitAPIKey, livekitAPISecret))
	if err != nil {
		return fmt.Errorf("bench latency: %w (run with -v to see its log)", err)
	}
	defer srv.Stop()
	workers := map[bool]*livekitWorker{}
	for _, r := range rows {
		if r.runtime != "livekit" {
			continue
		}
		w, err := startLivekitWorker(ctx, agentDir, work, srv, b.fake.URL(), b.set, r.speculate, logs)
		if err != nil {
			return err
		}
		defer w.stop()
		workers[r.speculate] = w
	}
	var base string
	if which == "both" {
		var stop func()
		pf := &providerFlags{llm: "openai", stt: "openai", tts: "openai", openAIURL: b.fake.URL(), openAIKey: openaitest.APIKey}
		base, stop, err = benchServe(ctx, b.fn, b.name, pf, b.logger,
			runtime.WithEndpointing(b.set.endpointing), runtime.WithSpeculation(true))
		if err != nil {
			return err
		}
		defer stop()
	}

	if !b.asJSON {
		var names []string
		for _, r := range rows {
			names = append(names, r.label)
		}
		fmt.Fprintf(c.stderr, "bench latency: the %s agent, %d turns each for %s, in rounds of %d (one call each), against openaitest at %s; livekit-server %s on %s\n",
			b.name, b.set.turns, strings.Join(names, "; "), roundTurns, b.fake.URL(), livekitServerVersion, srv.URL)
	}
	if b.note != "" {
		fmt.Fprintln(c.stderr, "note:", b.note)
	}

	turns := map[string][]latencyTurn{}
	var runErr error
rounds:
	for round := 1; len(turns[rows[len(rows)-1].key()]) < b.set.turns; round++ {
		for _, r := range rows {
			n := min(roundTurns, b.set.turns-len(turns[r.key()]))
			progress := prefixWriter(c.stderr, fmt.Sprintf("%s, round %d", r.label, round))
			var got []latencyTurn
			switch r.runtime {
			case "holdline":
				set := b.set
				set.turns, set.speculate = n, true
				lr := &latencyRun{settings: set, fake: b.fake, lines: b.lines, speech: b.speech, setLine: b.setLine, stderr: progress}
				runErr = lr.run(ctx, base)
				got = lr.turns
			case "livekit":
				lr := &livekitRun{settings: b.set, preemptive: r.speculate, fake: b.fake, lines: b.lines, speech: b.speech, setLine: b.setLine,
					stderr: progress, srv: srv, worker: workers[r.speculate], logger: b.logger}
				runErr = lr.round(ctx, fmt.Sprintf("bench-%s-%d", r.key(), round), n)
				got = lr.turns
			}
			for _, t := range got {
				t.Turn = len(turns[r.key()]) + 1
				turns[r.key()] = append(turns[r.key()], t)
			}
			if runErr != nil {
				runErr = fmt.Errorf("%s, round %d: %w", r.label, round, runErr)
				break rounds
			}
		}
	}

	comp := benchComparison{
		Agent: b.name, Cores: goruntime.NumCPU(), Turns: b.set.turns, RoundTurns: roundTurns, Note: b.note,
		Settings: map[string]float64{
			"ttft":               ms(b.set.ttft),
			"token_interval":     ms(b.set.tokenInterval),
			"speech_first_audio": ms(b.set.speechFirstAudio),
			"transcription":      ms(b.set.transcription),
			"silence":            ms(b.set.silence),
			"endpointing":        ms(b.set.endpointing),
		},
	}
	for _, r := range rows {
		comp.Runtimes = append(comp.Runtimes, runtimeReportOf(r, b.set, turns[r.key()]))
	}
	if len(turns) > 0 {
		if b.asJSON {
			enc := json.NewEncoder(c.stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(comp); err != nil {
				return err
			}
		} else {
			writeComparisonTable(c.stdout, comp)
		}
	}
	if runErr != nil {
		return fmt.Errorf("bench latency: %w", runErr)
	}
	var why []string
	for _, rr := range comp.Runtimes {
		for _, t := range rr.PerTurn {
			if t.Error != "" {
				why = append(why, fmt.Sprintf("%s, turn %d: %s", rr.Label, t.Turn, t.Error))
			}
		}
	}
	if len(why) > 0 {
		return fmt.Errorf("bench latency: %d turns not measured: %s", len(why), strings.Join(why, "; "))
	}
	return nil
}

func holdlineLabel(speculate bool) string {
	if speculate {
		return "Holdline, speculation on (default)"
	}
	return "Holdline, speculation off"
}

func livekitLabel(preemptive bool) string {
	if preemptive {
		return "LiveKit Agents " + livekitAgentsVersion + ", defaults (preemptive generation on)"
	}
	return "LiveKit Agents " + livekitAgentsVersion + ", preemptive generation off"
}

// prefixWriter writes each progress line to w with the runtime's label in
// front, so that the rounds can be told apart.
func prefixWriter(w io.Writer, label string) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		if _, err := fmt.Fprintf(w, "[%s] %s", label, p); err != nil {
			return 0, err
		}
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// livekitFloor is the least LiveKit Agents can take for a turn whose first
// phrase is tokens long, followed by more of the answer or not, read from
// agents-js 1.9.0 (voice/audio_recognition.ts, agent_activity.ts). Its
// Silero VAD ends the speech after set.silence of quiet; the utterance goes
// to the recogniser then, so the words are in at silence + transcription.
// The endpointing delay (minDelay, here set.endpointing) counts from the
// end of the speech, not from the VAD's verdict, and the turn waits for the
// words: it ends at max(minDelay, silence + transcription). Without
// preemptive generation the model is asked then. With it the model is
// asked as soon as the words are in, but the voice only once the turn has
// ended (preemptiveTts is off by default), so the first phrase is spoken at
// max(turn end, words + the model's part) + the voice's first audio.
func livekitFloor(set latencySettings, preemptive bool, tokens int, follows bool) time.Duration {
	n := tokens - 1
	if follows {
		n++
	}
	model := set.ttft + time.Duration(max(n, 0))*set.tokenInterval
	words := set.silence + set.transcription
	if preemptive {
		return max(set.endpointing, words+model) + set.speechFirstAudio
	}
	return max(set.endpointing, words) + model + set.speechFirstAudio
}

// The stages of a LiveKit turn, each timed from the end of the caller's
// speech, and the stage each follows: from the agent's session events (the
// job writes them to a file with the machine's wall clock), from the fake
// server's records and at the caller. With preemptive generation the model
// is asked as soon as the words are in; the turn ends once they are in and
// minDelay has passed since the end of the speech.
var (
	livekitStages = []latencyStageName{
		{"speech_stopped", "agent", "the VAD heard the caller stop (user state listening)", ""},
		{"transcription_sent", "server", "the utterance reached the recogniser", "speech_stopped"},
		{"transcription_answered", "server", "the recogniser answered", "transcription_sent"},
		{"transcript", "agent", "the session had the words (user_input_transcribed)", "transcription_answered"},
		{"user_turn", "agent", "the caller's turn ended (agent state thinking)", "transcript"},
		{"chat_request", "server", "the request reached the model", "user_turn"},
		{"first_token", "server", "the model's first token left", "chat_request"},
		{"speech_request", "server", "the first phrase reached the voice", "first_token"},
		{"first_audio_sent", "server", "the voice's first audio left", "speech_request"},
		{"playout_started", "agent", "the agent began to speak (agent state speaking)", "first_audio_sent"},
		{"heard", "client", "the caller heard it", "playout_started"},
	}
	livekitPreemptiveStages = func() []latencyStageName {
		st := slices.Clone(livekitStages)
		st[5] = latencyStageName{"chat_request", "server", "the request reached the model (preemptive)", "transcript"}
		return st
	}()
)

func livekitStageNames(preemptive bool) []latencyStageName {
	if preemptive {
		return livekitPreemptiveStages
	}
	return livekitStages
}

// runtimeReportOf sums up one runtime's turns.
func runtimeReportOf(r benchRow, set latencySettings, turns []latencyTurn) runtimeReport {
	rep := runtimeReport{Runtime: r.runtime, Label: r.label, Speculate: r.speculate, Turns: set.turns, PerTurn: turns}
	var stages []latencyStageName
	silence, endp := msText(ms(set.silence)), msText(ms(set.endpointing))
	if r.runtime == "holdline" {
		set.speculate = r.speculate
		stages = set.stages()
		rep.Endpointing = fmt.Sprintf("the detector's silence (%s), then the endpointing (%s): the turn ends %s after the speech at the soonest", silence, endp, msText(ms(set.silence+set.endpointing)))
		if r.speculate {
			rep.FloorRule = "silence + max(endpointing, transcription + answer): the model asked as soon as the words are in"
		} else {
			rep.FloorRule = "silence + max(endpointing, transcription) + answer: the model asked when the turn has ended"
		}
	} else {
		stages = livekitStageNames(r.speculate)
		rep.Version = fmt.Sprintf("@livekit/agents %s, livekit-server %s", livekitAgentsVersion, livekitServerVersion)
		rep.Endpointing = fmt.Sprintf("Silero minSilenceDuration %s; endpointing minDelay %s counted from the end of the speech, not after the silence: the turn ends %s after the speech at the soonest, once the words are in", silence, endp, msText(ms(max(set.silence, set.endpointing))))
		if r.speculate {
			rep.FloorRule = "max(minDelay, silence + transcription + the model's part) + the voice's first audio: the model asked as soon as the words are in, the voice once the turn has ended"
		} else {
			rep.FloorRule = "max(minDelay, silence + transcription) + answer: the model asked when the turn has ended"
		}
	}
	var heard, floor, share []float64
	at := map[string][]float64{}
	step := map[string][]float64{}
	for _, t := range turns {
		if !t.measured() {
			continue
		}
		rep.Measured++
		heard = append(heard, t.HeardMS)
		floor = append(floor, t.FloorMS)
		share = append(share, t.HeardMS-t.FloorMS)
		for _, st := range stages {
			v := t.AtMS[st.name]
			at[st.name] = append(at[st.name], v)
			step[st.name] = append(step[st.name], math.Round((v-t.AtMS[st.after])*10)/10)
		}
	}
	rep.VoiceToVoice, rep.Floor, rep.Share = stats(heard), stats(floor), stats(share)
	for _, st := range stages {
		rep.Stages = append(rep.Stages, latencyStage{Name: st.name, Source: st.source, What: st.what, After: st.after,
			At: stats(at[st.name]), Step: stats(step[st.name])})
	}
	// In the order they happened, on the whole.
	slices.SortStableFunc(rep.Stages, func(a, b latencyStage) int { return cmp.Compare(a.At.P50, b.At.P50) })
	return rep
}

// writeComparisonTable prints comp: one row per runtime, then each one's
// stages.
func writeComparisonTable(w io.Writer, comp benchComparison) {
	set := comp.Settings
	fmt.Fprintf(w, "Voice-to-voice latency: the %s agent, %d turns per runtime in rounds of %d (one call each, the runtimes in turn), on %d cores\n", comp.Agent, comp.Turns, comp.RoundTurns, comp.Cores)
	fmt.Fprintf(w, "providers (one fake server for all): first token %s, then a token every %s; speech first audio %s; transcription %s; silence %s; endpointing %s\n\n",
		msText(set["ttft"]), msText(set["token_interval"]), msText(set["speech_first_audio"]), msText(set["transcription"]), msText(set["silence"]), msText(set["endpointing"]))
	const row = "%-58s %9s %9s %9s %9s %10s %9s %9s\n"
	fmt.Fprintf(w, row, "end of speech → first audio heard", "measured", "p50", "p95", "max", "floor p50", "beyond p50", "p95")
	for _, r := range comp.Runtimes {
		fmt.Fprintf(w, row, r.Label, fmt.Sprintf("%d/%d", r.Measured, r.Turns), msText(r.VoiceToVoice.P50), msText(r.VoiceToVoice.P95), msText(r.VoiceToVoice.Max),
			msText(r.Floor.P50), msText(r.Share.P50), msText(r.Share.P95))
	}
	fmt.Fprintln(w, "\nbeyond: the measurement less the floor, turn by turn: what the runtime adds to what the providers and its own endpointing cost")
	fmt.Fprintln(w, "answer = ttft + token interval × (the first phrase's tokens − 1, + 1 when more of the answer follows it) + speech first audio")
	for _, r := range comp.Runtimes {
		var tokens []int
		for _, t := range r.PerTurn {
			if t.measured() {
				tokens = append(tokens, t.FirstPhraseTokens)
			}
		}
		fmt.Fprintf(w, "\n%s", r.Label)
		if r.Version != "" {
			fmt.Fprintf(w, " (%s)", r.Version)
		}
		fmt.Fprintf(w, "\n  turn ends: %s\n  floor = %s", r.Endpointing, r.FloorRule)
		if len(tokens) > 0 {
			fmt.Fprintf(w, "; first phrases of %d to %d tokens", slices.Min(tokens), slices.Max(tokens))
		}
		fmt.Fprintln(w)
		writeStageTable(w, "  ", r.Stages)
	}
	fmt.Fprintln(w, "\nat: after the end of the caller's speech; step: after the stage it follows")
}

// livekitAgentInstall finds test/latency-livekit above the working
// directory and installs its packages with npm ci, unless the lock file is
// the one installed last time.
func livekitAgentInstall(ctx context.Context, stderr io.Writer) (string, error) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", fmt.Errorf("bench latency --runtime livekit runs LiveKit Agents for Node: no %s on PATH (apt-get install nodejs npm)", tool)
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	dir := ""
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, livekitAgentDir, "agent.mjs")); err == nil {
			dir = filepath.Join(d, livekitAgentDir)
			break
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("bench latency --runtime livekit: no %s/agent.mjs in %s or above it: run it from the Holdline repository", livekitAgentDir, wd)
		}
	}
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(lock)
	want := hex.EncodeToString(sum[:])
	stamp := filepath.Join(dir, "node_modules", ".holdline-installed")
	if got, err := os.ReadFile(stamp); err == nil && string(got) == want {
		return dir, nil
	}
	fmt.Fprintf(stderr, "bench latency: npm ci in %s\n", dir)
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	// onnxruntime-node's install script would fetch CUDA libraries from
	// outside the npm registry; the CPU library ships in the package.
	cmd.Env = append(os.Environ(), "ONNXRUNTIME_NODE_INSTALL=skip")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("bench latency: npm ci in %s: %w: %s", dir, err, bytes.TrimSpace(out))
	}
	if err := os.WriteFile(stamp, []byte(want), 0o644); err != nil {
		return "", err
	}
	return dir, nil
}

// livekitWorker is one LiveKit Agents worker running agent.mjs, registered
// under a name of its own (explicit dispatch), with preemptive generation
// on or off.
type livekitWorker struct {
	name   string
	port   int
	proc   *livekittest.Process
	events *livekitEvents
	read   sync.WaitGroup // the output reader
}

func startLivekitWorker(ctx context.Context, agentDir, work string, srv *livekittest.Server, openAIURL string, set latencySettings, preemptive bool, logs io.Writer) (_ *livekitWorker, err error) {
	port, err := livekittest.FreePort("tcp")
	if err != nil {
		return nil, err
	}
	w := &livekitWorker{name: "holdline-bench-preemptive-" + strconv.FormatBool(preemptive), port: port}
	path := filepath.Join(work, w.name+".events.jsonl")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		return nil, err
	}
	w.events = &livekitEvents{path: path}
	inference, err := livekittest.FreePort("tcp")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("node", "agent.mjs", "start")
	cmd.Dir = agentDir
	cmd.Env = append(os.Environ(),
		// Without it rtc-node logs debug lines to stdout.
		"NODE_ENV=production",
		"LIVEKIT_URL="+srv.URL,
		"LIVEKIT_API_KEY="+srv.APIKey,
		"LIVEKIT_API_SECRET="+srv.APISecret,
		// Anything that would call LiveKit Cloud's inference gateway calls
		// a closed loopback port instead.
		fmt.Sprintf("LIVEKIT_INFERENCE_URL=http://127.0.0.1:%d/v1", inference),
		"HOLDLINE_LK_AGENT_NAME="+w.name,
		"HOLDLINE_LK_PORT="+strconv.Itoa(port),
		"HOLDLINE_LK_OPENAI_URL="+openAIURL,
		"HOLDLINE_LK_OPENAI_KEY="+openaitest.APIKey,
		"HOLDLINE_LK_PREEMPTIVE="+strconv.FormatBool(preemptive),
		"HOLDLINE_LK_MIN_SILENCE_MS="+strconv.FormatInt(set.silence.Milliseconds(), 10),
		"HOLDLINE_LK_MIN_DELAY_MS="+strconv.FormatInt(set.endpointing.Milliseconds(), 10),
		"HOLDLINE_LK_EVENTS="+path,
	)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = logs
	w.proc, err = livekittest.StartProcess("the LiveKit worker", cmd)
	if err != nil {
		return nil, fmt.Errorf("bench latency: %w", err)
	}
	defer func() {
		if err != nil {
			w.stop()
		}
	}()
	// The worker is ready to take a job once livekit-server has answered
	// its registration, which it logs.
	registered := make(chan struct{})
	w.read.Add(1)
	go func() {
		defer w.read.Done()
		var once sync.Once
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			fmt.Fprintf(logs, "[%s] %s\n", w.name, line)
			if bytes.Contains(line, []byte(`"msg":"registered worker"`)) {
				once.Do(func() { close(registered) })
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case <-registered:
		return w, nil
	case <-w.proc.Done():
		return nil, fmt.Errorf("bench latency: the LiveKit worker (node %s/agent.mjs) exited at start (%v); run with -v to see its log", agentDir, w.proc.Cmd.ProcessState)
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(livekitStart):
		return nil, fmt.Errorf("bench latency: the LiveKit worker did not register with livekit-server within %v", livekitStart)
	}
}

func (w *livekitWorker) stop() {
	w.proc.Stop()
	w.read.Wait()
}

// activeJobs is how many jobs the worker runs now (its /worker page).
func (w *livekitWorker) activeJobs(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/worker", w.port), nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var info struct {
		ActiveJobs int `json:"active_jobs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		return 0, err
	}
	return info.ActiveJobs, nil
}

// livekitEvent is one line agent.mjs writes: a session event of the job
// in Room, At the machine's wall clock in ms.
type livekitEvent struct {
	At    float64 `json:"at"`
	Kind  string  `json:"kind"` // job, user_state, agent_state, transcript, error
	Room  string  `json:"room"`
	Old   string  `json:"old"`
	New   string  `json:"new"`
	Text  string  `json:"text"`
	Final bool    `json:"final"`
	Error string  `json:"error"`
}

func (e livekitEvent) time() time.Time {
	return time.UnixMicro(int64(math.Round(e.At * 1000)))
}

// livekitEvents reads the file of a worker's events as it grows.
type livekitEvents struct {
	path string

	mu      sync.Mutex
	offset  int64
	partial []byte
	evs     []livekitEvent
}

// of returns the events of room so far, in order.
func (l *livekitEvents) of(room string) ([]livekitEvent, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.Open(l.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(l.offset, io.SeekStart); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	l.offset += int64(len(b))
	b = append(l.partial, b...)
	lines := bytes.Split(b, []byte("\n"))
	l.partial = append([]byte(nil), lines[len(lines)-1]...)
	for _, line := range lines[:len(lines)-1] {
		var e livekitEvent
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, fmt.Errorf("the agent's event %q: %w", line, err)
		}
		l.evs = append(l.evs, e)
	}
	var out []livekitEvent
	for _, e := range l.evs {
		if e.Room == room {
			out = append(out, e)
		}
	}
	return out, nil
}

// livekitRun is the caller's turns with one LiveKit configuration.
type livekitRun struct {
	settings   latencySettings
	preemptive bool
	fake       *openaitest.Server
	lines      []string
	speech     map[string][]int16
	setLine    func(string)
	stderr     io.Writer
	srv        *livekittest.Server
	worker     *livekitWorker
	logger     *slog.Logger

	turns []latencyTurn
}

// round is one call: the caller joins room, the agent is dispatched to it
// and greets, the caller speaks n turns, hangs up, and the room is deleted.
// It returns an error only when the round itself failed (the call could
// not be made, ctx ended); a turn that was not measured says why in its
// Error.
func (r *livekitRun) round(ctx context.Context, room string, n int) error {
	c, err := livekittest.DialCaller(ctx, r.srv, room, "caller")
	if err != nil {
		return err
	}
	defer func() {
		c.Close()
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.srv.DeleteRoom(dctx, room); err != nil {
			r.logger.Warn("bench latency: deleting the room", "room", room, "err", err)
		}
		// The next round starts once the job has ended and its process
		// has gone.
		for dctx.Err() == nil {
			if n, err := r.worker.activeJobs(dctx); err == nil && n == 0 {
				break
			}
			sleepCtx(dctx, 100*time.Millisecond)
		}
		sleepCtx(ctx, livekitCooldown)
	}()
	if err := r.srv.Dispatch(ctx, room, r.worker.name, ""); err != nil {
		return err
	}
	// The greeting first.
	sctx, cancel := context.WithTimeout(ctx, livekitStart)
	start := time.Now()
	err = r.settle(sctx, room, start, true)
	cancel()
	if err != nil {
		return fmt.Errorf("waiting for the agent's greeting to end: %w (the job's events: %s)", err, r.summary(room))
	}
	for i := range n {
		line := r.lines[i%len(r.lines)]
		t, err := r.turn(ctx, c, room, len(r.turns)+1, line)
		if err != nil {
			return err
		}
		r.turns = append(r.turns, t)
		if t.measured() {
			fmt.Fprintf(r.stderr, "turn %d: %q: first audio heard %.0f ms after the end of speech (floor %.0f ms)\n", t.Turn, line, t.HeardMS, t.FloorMS)
		} else {
			fmt.Fprintf(r.stderr, "turn %d: %q: not measured: %s\n", t.Turn, line, t.Error)
		}
	}
	return nil
}

// summary lists the events the job in room wrote, for an error.
func (r *livekitRun) summary(room string) string {
	evs, err := r.worker.events.of(room)
	if err != nil {
		return err.Error()
	}
	if len(evs) == 0 {
		return "none: the worker never started the job (-v shows its log)"
	}
	var parts []string
	for _, e := range evs {
		p := e.Kind
		switch {
		case e.New != "":
			p += " " + e.Old + "→" + e.New
		case e.Text != "":
			p += fmt.Sprintf(" %q", e.Text)
		case e.Error != "":
			p += " " + e.Error
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

// sleepCtx sleeps d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// poll waits until cond holds, checking it every 5 ms (the agent's events
// come from a file), or until ctx ends; what names the awaited thing.
func poll(ctx context.Context, what string, cond func() (bool, error)) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
}

// settle waits until the agent has nothing left to do after from: its
// state is listening and has not changed for benchSettle (with spoke, only
// once it has spoken since from).
func (r *livekitRun) settle(ctx context.Context, room string, from time.Time, spoke bool) error {
	return poll(ctx, "the agent to finish", func() (bool, error) {
		evs, err := r.worker.events.of(room)
		if err != nil {
			return false, err
		}
		var last *livekitEvent
		spoken := !spoke
		for i, e := range evs {
			if e.Kind != "agent_state" || e.time().Before(from) {
				continue
			}
			last = &evs[i]
			if e.New == "speaking" {
				spoken = true
			}
		}
		return spoken && last != nil && last.New == "listening" && time.Since(last.time()) >= benchSettle, nil
	})
}

// turn speaks line and measures the answer. It returns an error only when
// ctx ended.
func (r *livekitRun) turn(ctx context.Context, c *livekittest.Caller, room string, n int, line string) (latencyTurn, error) {
	t := latencyTurn{Turn: n, Said: line}
	pcm := r.speech[line]
	spoken := time.Duration(len(pcm)) * time.Second / media.Rate48k
	r.setLine(line)
	sayAt := time.Now()
	fail := func(format string, args ...any) (latencyTurn, error) {
		t.Error = fmt.Sprintf(format, args...)
		if ctx.Err() != nil {
			return t, ctx.Err()
		}
		// Let whatever the agent is doing end before the next turn.
		sctx, cancel := context.WithTimeout(ctx, benchTurnTimeout)
		defer cancel()
		_ = r.settle(sctx, room, sayAt, false)
		return t, ctx.Err()
	}
	c.Say(pcm)

	tctx, cancel := context.WithTimeout(ctx, spoken+benchTurnTimeout)
	defer cancel()
	// The caller's turn has ended when the agent starts thinking about it.
	var turnEnd time.Time
	err := poll(tctx, "the end of the caller's turn", func() (bool, error) {
		evs, err := r.worker.events.of(room)
		if err != nil {
			return false, err
		}
		for _, e := range evs {
			if e.Kind == "agent_state" && e.New == "thinking" && e.time().After(sayAt) {
				turnEnd = e.time()
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fail("the caller's turn never ended (no agent state thinking): %v", err)
	}
	var end time.Time
	for _, off := range c.Offsets() {
		if off.After(sayAt) && off.Before(turnEnd) {
			end = off
		}
	}
	if end.IsZero() {
		return fail("the caller's speech has no end before the agent started thinking")
	}
	var heard time.Time
	err = poll(tctx, "the agent's answer", func() (bool, error) {
		heard = firstLoud(c.Levels(""), end)
		return !heard.IsZero(), nil
	})
	if err != nil {
		return fail("no audio from the agent: %v", err)
	}
	if err := r.settle(tctx, room, turnEnd, true); err != nil {
		return fail("the agent never finished its answer: %v", err)
	}

	// The agent's side, from its events.
	at := map[string]time.Time{"user_turn": turnEnd, "heard": heard}
	evs, err := r.worker.events.of(room)
	if err != nil {
		return fail("%v", err)
	}
	for _, e := range evs {
		et := e.time()
		switch {
		case !et.After(sayAt):
		case e.Kind == "error":
			return fail("the agent's session: %s", e.Error)
		case et.Before(turnEnd):
			// Before the turn ended: the last of each counts.
			switch {
			case e.Kind == "user_state" && e.Old == "speaking" && e.New == "listening":
				at["speech_stopped"] = et
			case e.Kind == "transcript" && e.Final:
				at["transcript"] = et
			}
		case e.Kind == "agent_state" && e.New == "speaking":
			if _, ok := at["playout_started"]; !ok {
				at["playout_started"] = et
			}
		}
	}
	// The providers' side, from the fake server's records.
	for _, tr := range r.fake.Transcriptions() {
		if tr.Received.After(sayAt) && tr.Received.Before(turnEnd) {
			at["transcription_sent"], at["transcription_answered"] = tr.Received, tr.Answered
		}
	}
	var sp *openaitest.Speech
	for _, s := range r.fake.Speeches() {
		if s.Received.After(sayAt) {
			sp = &s
			break
		}
	}
	if sp == nil || sp.FirstAudio.IsZero() {
		return fail("the voice was not asked, or sent no audio")
	}
	// The answer heard is the last the model began before the voice was
	// asked (a preemptive request the words overtook was cancelled).
	var chat *openaitest.ChatRequest
	for _, cr := range r.fake.ChatRequests() {
		if cr.Received.After(sayAt) && cr.Received.Before(sp.Received) {
			chat = &cr
		}
	}
	if chat == nil || chat.FirstToken.IsZero() {
		return fail("the model was not asked, or sent nothing")
	}
	at["chat_request"], at["first_token"] = chat.Received, chat.FirstToken
	at["speech_request"], at["first_audio_sent"] = sp.Received, sp.FirstAudio
	for _, s := range livekitStageNames(r.preemptive) {
		if _, ok := at[s.name]; !ok {
			return fail("no %s (%s)", s.name, s.what)
		}
	}

	t.FirstPhrase = sp.Input
	t.FirstPhraseTokens = len(openaitest.ChatTokens(sp.Input))
	follows := strings.TrimSpace(chat.Answer.Content) != strings.TrimSpace(sp.Input) || len(chat.Answer.ToolCalls) > 0
	t.FloorMS = ms(livekitFloor(r.settings, r.preemptive, t.FirstPhraseTokens, follows))
	t.HeardMS = ms(heard.Sub(end))
	t.AtMS = map[string]float64{}
	for k, v := range at {
		t.AtMS[k] = ms(v.Sub(end))
	}
	return t, nil
}

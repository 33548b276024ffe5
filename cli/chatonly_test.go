package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/examples/booking"
	"github.com/holdline/holdline/internal/need"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/openaitest"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
)

// needEspeak skips the test when espeak-ng, the local voice, is missing.
func needEspeak(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("espeak-ng")
	if err != nil {
		need.Missing(t, "espeak-ng is missing: apt-get install espeak-ng")
	}
	return path
}

// chatOnlyServer is an OpenAI-compatible server that serves chat
// completions only, as vLLM, Ollama and llama.cpp's server do, with
// OPENAI_BASE_URL and OPENAI_API_KEY pointing at it.
func chatOnlyServer(t *testing.T) *openaitest.Server {
	t.Helper()
	srv := openaitest.New(booking.NewDemoModel(), openaitest.WithChatOnly())
	t.Cleanup(srv.Close)
	t.Setenv("OPENAI_BASE_URL", srv.URL())
	t.Setenv("OPENAI_API_KEY", openaitest.APIKey)
	return srv
}

// transcriptOrder checks that each of want is printed exactly once, in
// this order, as a line of out beginning with it.
func transcriptOrder(t *testing.T, out string, want ...string) {
	t.Helper()
	lines := strings.Split(out, "\n")
	last, lastWant := -1, ""
	for _, w := range want {
		at := -1
		for i, l := range lines {
			if strings.HasPrefix(l, w) {
				if at >= 0 {
					t.Errorf("%q is printed twice:\n%s", w, out)
				}
				at = i
			}
		}
		switch {
		case at < 0:
			t.Errorf("no line %q:\n%s", w, out)
			return
		case at < last:
			t.Errorf("%q is printed before %q:\n%s", w, lastWant, out)
		}
		last, lastWant = at, w
	}
}

// heard checks that the recording at path holds at least atLeast of
// audible samples.
func heard(t *testing.T, path string, atLeast time.Duration) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	samples, rate, err := media.ReadWAV(f)
	if err != nil {
		t.Fatal(err)
	}
	loud := 0
	for _, v := range samples {
		if v > 1000 || v < -1000 {
			loud++
		}
	}
	if spoken := (media.Frame{Samples: samples[:loud], SampleRate: rate}).Duration(); spoken < atLeast {
		t.Errorf("the recording has %v of audible samples; want the agent heard for at least %v", spoken, atLeast)
	}
}

// onlyChat checks that the server was asked for chat completions and
// nothing else: the voice and the recogniser were this machine's.
func onlyChat(t *testing.T, srv *openaitest.Server) {
	t.Helper()
	chats := 0
	for _, r := range srv.Requests() {
		if r.Path != "/v1/chat/completions" {
			t.Errorf("the chat-only server was sent %s %s", r.Method, r.Path)
			continue
		}
		chats++
	}
	if chats == 0 {
		t.Error("the model never asked the server")
	}
}

// With OPENAI_BASE_URL at a server that serves chat completions only,
// tried as a new user would: --llm openai sends the model there and the
// other roles stay on this machine, so the reply is spoken by espeak-ng
// (typed) and the caller is heard by pocketsphinx (spoken), with no
// error, and the transcript is in the order things happened.
func TestConsoleOnChatOnlyServerKeepsLocalEngines(t *testing.T) {
	espeak := needEspeak(t)
	t.Run("typed", func(t *testing.T) {
		srv := chatOnlyServer(t)
		rec := filepath.Join(t.TempDir(), "agent.wav")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var out, errs bytes.Buffer
		in := strings.NewReader("Book a table for two at seven\n")
		if err := run(ctx, []string{"console", "--agent", "booking", "--llm", "openai", "--audio-out", rec, "-v"}, in, &out, &errs); err != nil {
			t.Fatalf("console: %v\nstdout: %s\nstderr: %s", err, out.String(), errs.String())
		}
		got := out.String()
		t.Logf("\n%s", got)
		if strings.Contains(got, "error:") || strings.Contains(got, "failover:") {
			t.Errorf("a provider failed:\n%s", got)
		}
		transcriptOrder(t, got,
			"agent: Hello, thanks for calling Holdline Bistro.",
			"user: Book a table for two at seven",
			"tool: check_availability -> succeeded",
			"tool: book_table -> succeeded",
			"agent: You're booked: a table for two at 19:00.",
		)
		heard(t, rec, 3*time.Second)
		onlyChat(t, srv)
		if want := "engines=\"model openai at " + srv.URL() + ", voice espeak\""; !strings.Contains(errs.String(), want) {
			t.Errorf("the console's log lacks %s:\n%s", want, firstLines(errs.String(), 5))
		}
		if strings.Contains(got+errs.String(), openaitest.APIKey) {
			t.Error("the API key was printed")
		}
	})
	t.Run("spoken", func(t *testing.T) {
		srv := chatOnlyServer(t)
		wav := filepath.Join(t.TempDir(), "caller.wav")
		if out, err := exec.Command(espeak, "-v", "en-us+edward", "-p", "35", "-s", "175", "-w", wav, "Book a table for two at seven.").CombinedOutput(); err != nil {
			t.Fatalf("espeak-ng: %v: %s", err, out)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var out, errs bytes.Buffer
		if err := run(ctx, []string{"console", "--agent", "booking", "--llm", "openai", "--audio-in", wav, "-v"}, nil, &out, &errs); err != nil {
			t.Fatalf("console: %v\nstdout: %s\nstderr: %s", err, out.String(), errs.String())
		}
		got := out.String()
		t.Logf("\n%s", got)
		if strings.Contains(got, "error:") || strings.Contains(got, "failover:") {
			t.Errorf("a provider failed:\n%s", got)
		}
		transcriptOrder(t, got,
			"user: book a table for two at seven",
			"tool: book_table -> succeeded",
			"agent: You're booked: a table for two at 19:00.",
		)
		onlyChat(t, srv)
		if want := "engines=\"model openai at " + srv.URL() + ", voice espeak, recogniser pocketsphinx\""; !strings.Contains(errs.String(), want) {
			t.Errorf("the console's log lacks %s:\n%s", want, firstLines(errs.String(), 5))
		}
	})
}

// A voice configured to OpenAI whose server has no speech endpoint, tried
// as a new user would: every sentence fails there, and espeak-ng, the
// backup the CLI gives a voice that has none, speaks it instead, with a
// provider_failover event and no error. The server never produced a
// sample, so what the recording holds is espeak-ng's.
func TestConsoleFailingVoiceFallsBackToEspeak(t *testing.T) {
	needEspeak(t)
	srv := chatOnlyServer(t)
	dir := t.TempDir()
	rec, eventsPath := filepath.Join(dir, "agent.wav"), filepath.Join(dir, "events.jsonl")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errs bytes.Buffer
	in := strings.NewReader("Book a table for two at seven\n")
	args := []string{"console", "--agent", "booking", "--llm", "openai", "--tts", "openai", "--audio-out", rec, "--events", eventsPath, "-v"}
	if err := run(ctx, args, in, &out, &errs); err != nil {
		t.Fatalf("console: %v\nstdout: %s\nstderr: %s", err, out.String(), errs.String())
	}
	got := out.String()
	t.Logf("\n%s", got)
	if strings.Contains(got, "error:") {
		t.Errorf("the answer was not spoken:\n%s", got)
	}
	if !strings.Contains(got, "failover: tts: ") {
		t.Errorf("no failover line:\n%s", got)
	}
	transcriptOrder(t, got,
		"agent: Hello, thanks for calling Holdline Bistro.",
		"user: Book a table for two at seven",
		"tool: book_table -> succeeded",
		"agent: You're booked: a table for two at 19:00.",
	)
	heard(t, rec, 3*time.Second)

	speechAsked := slices.ContainsFunc(srv.Requests(), func(r openaitest.Request) bool { return r.Path == "/v1/audio/speech" })
	if !speechAsked {
		t.Error("the OpenAI voice was never asked to speak")
	}
	if n := len(srv.Speeches()); n != 0 {
		t.Errorf("the chat-only server spoke %d times", n)
	}
	data, err := os.ReadFile(eventsPath)
	if err != nil {
		t.Fatal(err)
	}
	failovers := 0
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var e struct{ Kind, Provider string }
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("bad JSONL line %q: %v", line, err)
		}
		if e.Kind == "provider_failover" && e.Provider == "tts" {
			failovers++
		}
	}
	if failovers == 0 {
		t.Error("no provider_failover event for the voice")
	}
	if want := "voice openai at " + srv.URL() + " (backup espeak)"; !strings.Contains(errs.String(), want) {
		t.Errorf("the console's log lacks %q:\n%s", want, firstLines(errs.String(), 5))
	}
}

// Which engine each role gets: what the agent's Go code set stays, a flag
// replaces it, and the environment fills only what both leave empty: a
// key alone sends those roles to OpenAI; a key with OPENAI_BASE_URL
// elsewhere sends only the roles a flag names there; a voice without a
// backup gets espeak-ng's unless --tts-backup none.
func TestProviderDefaultsFollowTheEndpoint(t *testing.T) {
	needEspeak(t)
	const custom = "http://127.0.0.1:9/v1"
	demo := ownEngine(booking.NewDemoModel())
	for _, tc := range []struct {
		name, key, base string
		args            []string
		want            roles
	}{
		{"no key", "", "", nil,
			roles{model: demo, tts: "espeak", stt: "pocketsphinx"}},
		{"key for OpenAI", "sk-x", "", nil,
			roles{model: demo, tts: "openai", ttsBackup: "espeak", stt: "openai"}},
		{"key with OpenAI's URL", "sk-x", "https://api.openai.com/v1", nil,
			roles{model: demo, tts: "openai", ttsBackup: "espeak", stt: "openai"}},
		{"key with another server", "sk-x", custom, nil,
			roles{model: demo, tts: "espeak", stt: "pocketsphinx"}},
		{"another server, --llm openai", "sk-x", custom, []string{"--llm", "openai"},
			roles{model: "openai", tts: "espeak", stt: "pocketsphinx"}},
		{"another server, every role", "sk-x", custom, []string{"--llm", "openai", "--tts", "openai", "--stt", "openai"},
			roles{model: "openai", tts: "openai", ttsBackup: "espeak", stt: "openai"}},
		{"no backup asked", "sk-x", "", []string{"--tts-backup", "none"},
			roles{model: demo, tts: "openai", stt: "openai"}},
		{"backup asked", "", "", []string{"--tts", "demo", "--tts-backup", "demo"},
			roles{model: demo, tts: "demo", ttsBackup: "demo", stt: "pocketsphinx"}},
		{"--llm demo is the agent's own", "sk-x", "", []string{"--llm", "demo"},
			roles{model: demo, tts: "openai", ttsBackup: "espeak", stt: "openai"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OPENAI_API_KEY", tc.key)
			t.Setenv("OPENAI_BASE_URL", tc.base)
			fs := flag.NewFlagSet("console", flag.ContinueOnError)
			var pf providerFlags
			pf.register(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			defer pf.closeShared()
			agent := booking.New(booking.NewRestaurant(8))
			prov, err := pf.equip(agent, true)
			if err != nil {
				t.Fatal(err)
			}
			defer prov.Close()
			if prov.roles != tc.want {
				t.Errorf("roles = %+v; want %+v", prov.roles, tc.want)
			}
			if (agent.BackupTTS != nil) != (tc.want.ttsBackup != "") {
				t.Errorf("backup voice %v; want %q", agent.BackupTTS, tc.want.ttsBackup)
			}
		})
	}
}

// An agent of the user's own: its Go providers stay under the
// environment's key, a flag replaces them on it and its peers, and a role
// nobody fills fails with what to do.
func TestAgentsOwnProvidersWinOverTheEnvironment(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "")
	own := scripted.NewLLM()
	voice, err := scripted.NewTTS()
	if err != nil {
		t.Fatal(err)
	}
	newAgent := func(model llm.Model) *runtime.Agent {
		peer := &runtime.Agent{Name: "kitchen"}
		return &runtime.Agent{Name: "pizza", Model: model, TTS: voice, Peers: []*runtime.Agent{peer}}
	}
	equip := func(args ...string) (*runtime.Agent, *providers, error) {
		t.Helper()
		fs := flag.NewFlagSet("console", flag.ContinueOnError)
		var pf providerFlags
		pf.register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		agent := newAgent(own)
		if len(args) > 0 && args[0] == "nomodel" {
			agent = newAgent(nil)
		}
		prov, err := pf.equip(agent, false)
		if prov != nil {
			t.Cleanup(func() { prov.Close() })
		}
		return agent, prov, err
	}

	t.Setenv("OPENAI_API_KEY", "sk-x")
	agent, prov, err := equip()
	if err != nil {
		t.Fatal(err)
	}
	if agent.Model != own || agent.TTS != voice || agent.Peers[0].Model != own || agent.Peers[0].TTS != voice {
		t.Errorf("with a key in the environment the agent runs on %T and %T (peer %T, %T); want its own", agent.Model, agent.TTS, agent.Peers[0].Model, agent.Peers[0].TTS)
	}
	if prov.roles.model != "own:*scripted.LLM" || prov.roles.tts != "own:*scripted.TTS" {
		t.Errorf("roles %+v; want the agent's own named by type", prov.roles)
	}

	agent, prov, err = equip("--llm", "openai")
	if err != nil {
		t.Fatal(err)
	}
	if agent.Model == own || agent.Peers[0].Model != agent.Model || prov.roles.model != "openai" {
		t.Errorf("--llm openai: agent runs on %T, peer on %T, roles %+v; want OpenAI's for both", agent.Model, agent.Peers[0].Model, prov.roles)
	}

	t.Setenv("OPENAI_API_KEY", "")
	if _, _, err := equip("nomodel"); err == nil || !strings.Contains(err.Error(), `agent "pizza" has no model`) || !strings.Contains(err.Error(), "--llm openai") {
		t.Errorf("an agent with no model and no key: %v; want an error saying how to give it one", err)
	}
}

// The startup line says where the OpenAI roles go, without the
// credentials or query a base URL may carry.
func TestEnginesLineHidesCredentials(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "http://holdline:s3cret@llm.example:8000/v1?api-key=k3y")
	got := roles{model: "openai", tts: "espeak"}.String()
	if want := "model openai at http://llm.example:8000/v1, voice espeak"; got != want {
		t.Errorf("engines = %q; want %q", got, want)
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

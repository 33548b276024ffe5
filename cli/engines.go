package cli

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"

	llmopenai "github.com/holdline/holdline/llm/openai"
	"github.com/holdline/holdline/llm/realtime"
	sttopenai "github.com/holdline/holdline/stt/openai"
	ttsopenai "github.com/holdline/holdline/tts/openai"
)

// printEngines writes the start-up lines that say which engine runs each
// role of r, and which of them are paid cloud services: a key in the
// environment sends roles to OpenAI, and the user must hear it from
// Holdline rather than from the bill. It names where a key comes from,
// never the key.
func (p *providerFlags) printEngines(w io.Writer, r roles) {
	for _, l := range p.engineLines(r) {
		fmt.Fprintln(w, l)
	}
}

// engineLines are printEngines' lines: one per role (no recogniser or
// VAD when the session takes no audio), and a last one when the
// environment, not a flag, sent a role to OpenAI.
func (p *providerFlags) engineLines(r roles) []string {
	var lines []string
	add := func(role, engine, backup string) {
		if engine == "" {
			return
		}
		l := fmt.Sprintf("%-11s %s", role+":", engine)
		if backup != "" {
			l += "; backup " + backup
		}
		lines = append(lines, l)
	}
	add("model", p.describe("model", r.model), p.describe("model", r.modelBackup))
	voice := p.describe("voice", r.tts)
	if r.tts == "" && r.model == "realtime" {
		voice = "the model's own (OpenAI Realtime, voice " + realtime.DefaultVoice + ")"
	}
	add("voice", voice, p.describe("voice", r.ttsBackup))
	if r.stt != "" {
		add("recogniser", p.describe("recogniser", r.stt), p.describe("recogniser", r.sttBackup))
		// The runtime's default detector: no flag chooses another.
		add("VAD", "energy detector (local)", "")
	}
	var byEnv []string
	for _, c := range []struct{ flag, engine, local string }{
		{p.stt, r.stt, "--stt pocketsphinx"},
		{p.tts, r.tts, "--tts espeak"},
	} {
		// Realtime is only ever asked for; a recogniser that is Realtime's
		// follows from --llm realtime, not from the key.
		if c.flag == "" && c.engine == "openai" && openAIByDefault() {
			byEnv = append(byEnv, c.local)
		}
	}
	if len(byEnv) > 0 {
		lines = append(lines, "OPENAI_API_KEY is set, so OpenAI runs the roles neither a flag nor the agent fills; to keep them on this machine: "+strings.Join(byEnv, " "))
	}
	return lines
}

// describe says what engine is, for role ("" for none).
func (p *providerFlags) describe(role, engine string) string {
	model := func(def string) string {
		if p.model != "" {
			return p.model
		}
		return def
	}
	if typ, ok := strings.CutPrefix(engine, "own:"); ok {
		return "the agent's own (" + typ + ")"
	}
	switch role + "/" + engine {
	case "model/openai":
		return "OpenAI " + model(llmopenai.DefaultModel) + " " + openAIWhere()
	case "model/realtime":
		return "OpenAI Realtime " + model(realtime.DefaultModel) + ", speech to speech, " + openAIWhere()
	case "voice/espeak":
		return "espeak-ng (local)"
	case "voice/openai":
		return "OpenAI " + ttsopenai.DefaultModel + ", voice " + ttsopenai.DefaultVoice + ", " + openAIWhere()
	case "voice/demo":
		return "demo tone at a speaking pace (local)"
	case "recogniser/pocketsphinx":
		return "pocketsphinx, with the agent's phrases as its grammar (local)"
	case "recogniser/openai":
		return "OpenAI " + sttopenai.DefaultModel + " " + openAIWhere()
	case "recogniser/realtime":
		return "OpenAI Realtime's transcription, " + realtime.DefaultTranscriptionModel + ", " + openAIWhere()
	case "recogniser/demo":
		return "demo, scripted (local)"
	}
	return engine
}

// openAIWhere says where the OpenAI clients send requests, whether that
// costs money, and where their key comes from, as in "at
// https://api.openai.com/v1 (paid cloud service, OPENAI_API_KEY from the
// environment)".
func openAIWhere() string {
	key := "no key"
	if os.Getenv("OPENAI_API_KEY") != "" {
		key = "OPENAI_API_KEY from the environment"
	}
	base := os.Getenv("OPENAI_BASE_URL")
	switch {
	case officialEndpoint(base):
		return "at " + endpoint() + " (paid cloud service, " + key + ")"
	case onThisMachine(base):
		return "at " + endpoint() + " (OpenAI-compatible server on this machine, " + key + ")"
	}
	return "at " + endpoint() + " (OpenAI-compatible server elsewhere: it may charge; " + key + ")"
}

// onThisMachine reports whether base, an OPENAI_BASE_URL, is a loopback
// address.
func onThisMachine(base string) bool {
	u, err := url.Parse(base)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

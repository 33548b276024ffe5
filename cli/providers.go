package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"

	"github.com/holdline/holdline/llm"
	llmopenai "github.com/holdline/holdline/llm/openai"
	"github.com/holdline/holdline/llm/realtime"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/server"
	"github.com/holdline/holdline/stt"
	sttopenai "github.com/holdline/holdline/stt/openai"
	"github.com/holdline/holdline/stt/pocketsphinx"
	"github.com/holdline/holdline/tts"
	"github.com/holdline/holdline/tts/espeak"
	ttsopenai "github.com/holdline/holdline/tts/openai"
)

// providerFlags choose an agent's model, recogniser and synthesiser, and
// their backups. Defaults follow the environment: with OPENAI_API_KEY set
// for OpenAI's own API every role uses OpenAI; otherwise every role runs on
// this machine, and an OpenAI-compatible server at OPENAI_BASE_URL gets
// only the roles a flag gives it (see openAIByDefault). A voice with no
// backup gets espeak-ng's when it is installed (see build).
type providerFlags struct {
	llm, model, stt, tts string
	llmBackup            string
	sttBackup, ttsBackup string
	wps                  float64

	// openAIURL and openAIKey, when set, are where the OpenAI clients
	// send their requests and the key they send, instead of
	// OPENAI_BASE_URL and OPENAI_API_KEY: bench latency points them at
	// its own server.
	openAIURL, openAIKey string

	// espeak is espeak-ng's voice, the default backup voice: found once
	// and shared by every session (it is safe for concurrent use).
	espeakOnce sync.Once
	espeak     *espeak.Synthesizer

	// recognizers are the local recognisers, one per grammar (an
	// agent's phrases), made at the first session that needs one and
	// shared by all after it: each session of its own would load the
	// acoustic model and compile the grammar again, and hold decoders
	// the others cannot use. closeShared closes them.
	recMu       sync.Mutex
	recognizers map[string]*pocketsphinx.Recognizer
}

// localRecognizer returns the process's pocketsphinx recogniser for
// phrases, made once. Sessions cannot close it: closeShared does.
func (p *providerFlags) localRecognizer(phrases []string) (stt.Recognizer, error) {
	key := strings.Join(phrases, "\n")
	p.recMu.Lock()
	defer p.recMu.Unlock()
	if r, ok := p.recognizers[key]; ok {
		return sharedRecognizer{r}, nil
	}
	r, err := pocketsphinx.New(pocketsphinx.WithPhrases(phrases...))
	if err != nil {
		return nil, err
	}
	if p.recognizers == nil {
		p.recognizers = map[string]*pocketsphinx.Recognizer{}
	}
	p.recognizers[key] = r
	return sharedRecognizer{r}, nil
}

// closeShared closes the engines the sessions shared.
func (p *providerFlags) closeShared() error {
	p.recMu.Lock()
	defer p.recMu.Unlock()
	var errs []error
	for key, r := range p.recognizers {
		errs = append(errs, r.Close())
		delete(p.recognizers, key)
	}
	return errors.Join(errs...)
}

// sharedRecognizer is a recogniser sessions share: it has no Close for a
// session's providers to call.
type sharedRecognizer struct{ r *pocketsphinx.Recognizer }

func (s sharedRecognizer) Stream(ctx context.Context, sampleRate int) (stt.Stream, error) {
	return s.r.Stream(ctx, sampleRate)
}

func (p *providerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.llm, "llm", "", "model `provider`: agent (the model the agent's Go code set; demo is its old name), openai (OpenAI or any compatible server at OPENAI_BASE_URL), realtime (OpenAI Realtime, speech to speech); default the agent's own, else openai when OPENAI_API_KEY is set")
	fs.StringVar(&p.model, "model", "", "model `NAME` for --llm openai or realtime (default gpt-4o-mini, gpt-realtime)")
	fs.StringVar(&p.stt, "stt", "", "speech recogniser, replacing the agent's own: pocketsphinx (local, listening for the agent's Phrases), openai, realtime, demo; default the agent's own, else realtime with --llm realtime, openai with a key for OpenAI's own API, else pocketsphinx")
	fs.StringVar(&p.tts, "tts", "", "voice, replacing the agent's own: espeak (local), openai, demo (a tone at a speaking pace); default the agent's own, else none with --llm realtime (the model speaks), openai with a key for OpenAI's own API, else espeak")
	fs.StringVar(&p.llmBackup, "llm-backup", "", "model provider that takes over when the model fails before its first token")
	fs.StringVar(&p.sttBackup, "stt-backup", "", "recogniser that takes over when the recogniser fails")
	fs.StringVar(&p.ttsBackup, "tts-backup", "", "voice that takes over when the voice fails (default espeak, when installed, for any other voice; none: no backup)")
	fs.Float64Var(&p.wps, "words-per-second", 2.5, "speaking pace of --tts demo")
}

// providers are what the flags and the environment gave one session's
// agent: the roles it filled, and what to close when the session ends.
type providers struct {
	closers []io.Closer
	// roles names the engine each role uses, for the startup line.
	roles roles
}

// roles names the engine of each role; "" where there is none.
type roles struct {
	model, modelBackup string
	stt, sttBackup     string // none when the session takes no audio
	tts, ttsBackup     string // no voice when the model speaks itself
}

// String says which engine each role uses, and where the OpenAI ones send
// their requests, as in "model openai at http://127.0.0.1:8000/v1, voice
// espeak".
func (r roles) String() string {
	var b strings.Builder
	role := func(name, engine, backup string) {
		if engine == "" {
			return
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(name + " " + engine)
		if engine == "openai" || engine == "realtime" {
			b.WriteString(" at " + endpoint())
		}
		if backup != "" {
			b.WriteString(" (backup " + backup + ")")
		}
	}
	role("model", r.model, r.modelBackup)
	if r.tts == "" && r.model == "realtime" {
		r.tts = "the model's own"
	}
	role("voice", r.tts, r.ttsBackup)
	role("recogniser", r.stt, r.sttBackup)
	return b.String()
}

// callCost is the share of one CPU core a session on these providers
// takes on this machine (server.WithCallCost): the local recogniser and
// voice decode and synthesise here, the cloud ones elsewhere (0: only the
// session and its transport, which the default cap covers).
func (p *providers) callCost() float64 {
	for _, engine := range []string{p.roles.stt, p.roles.sttBackup, p.roles.tts} {
		switch engine {
		case "pocketsphinx", "espeak", ownEngine((*pocketsphinx.Recognizer)(nil)), ownEngine((*espeak.Synthesizer)(nil)):
			return server.LocalCallCost
		}
	}
	return 0
}

func (p *providers) Close() error {
	var errs []error
	for _, c := range p.closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// openAIByDefault reports whether the roles no flag names go to OpenAI:
// they do with OPENAI_API_KEY set for OpenAI's own API. A server at another
// OPENAI_BASE_URL (vLLM, Ollama, LocalAI, llama.cpp's server) often serves
// chat completions only, without the audio endpoints, so it gets only the
// roles asked for (--llm, --stt, --tts openai); the others stay on this
// machine.
func openAIByDefault() bool {
	return os.Getenv("OPENAI_API_KEY") != "" && officialEndpoint(os.Getenv("OPENAI_BASE_URL"))
}

// officialEndpoint reports whether base, an OPENAI_BASE_URL, is OpenAI's
// own API: unset, or on api.openai.com.
func officialEndpoint(base string) bool {
	if base == "" {
		return true
	}
	u, err := url.Parse(base)
	return err == nil && strings.EqualFold(u.Hostname(), "api.openai.com")
}

// endpoint is where the OpenAI clients send requests, as the startup line
// says it: OPENAI_BASE_URL without the credentials or query it may carry.
func endpoint() string {
	base := os.Getenv("OPENAI_BASE_URL")
	if base == "" {
		return llmopenai.DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil {
		return "OPENAI_BASE_URL (not a URL)"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment = nil, "", false, ""
	return u.String()
}

// ownModel is --llm's name for the model the agent's Go code set ("demo"
// is its older name, from when the example agents' offline model was the
// only one of its kind).
const ownModel = "agent"

// equip gives agent, and the agents it may hand the call to (Peers), the
// providers of one session. What the agent's Go code set stays, and fills
// a peer that left the role empty; a flag naming an engine for a role
// replaces it on every agent, since the command line is the user's latest
// word; the environment (see openAIByDefault) and this machine's engines
// fill only what both leave empty. withSTT is false when the session
// takes no audio, so no recogniser is made.
//
// A voice other than espeak with no backup gets espeak-ng as its backup
// when espeak-ng is installed: a voice that fails (a server without the
// speech endpoint, a wrong key) is then heard as another voice, with a
// provider_failover event, rather than not at all.
func (p *providerFlags) equip(agent *runtime.Agent, withSTT bool) (_ *providers, err error) {
	out := &providers{}
	defer func() {
		if err != nil {
			out.Close()
		}
	}()
	team := agentTeam(agent)

	// The model.
	llmName := p.llm
	if llmName == "demo" {
		llmName = ownModel
	}
	if llmName == "" {
		switch {
		case agent.Model != nil:
			llmName = ownModel
		case openAIByDefault():
			llmName = "openai"
		default:
			return nil, fmt.Errorf("agent %q has no model: set its Model in Go, or choose one with --llm openai (OPENAI_API_KEY, OPENAI_BASE_URL) or --llm realtime", agent.Name)
		}
	}
	var rt *realtime.Client
	agentsOwn := agent.Model // before a flag replaces it: --llm-backup agent names it
	if llmName == ownModel {
		if agent.Model == nil {
			return nil, fmt.Errorf("--llm %s: agent %q has no model of its own; choose one with --llm openai or --llm realtime", p.llm, agent.Name)
		}
		out.roles.model = ownEngine(agent.Model)
		fill(team, agent.Model, func(a *runtime.Agent) *llm.Model { return &a.Model })
	} else {
		m, c, err := p.buildModel(llmName, p.tts != "" || agent.TTS != nil, out)
		if err != nil {
			return nil, err
		}
		rt = c
		replace(team, m, func(a *runtime.Agent) *llm.Model { return &a.Model })
		out.roles.model = llmName
	}
	switch {
	case p.llmBackup == ownModel || p.llmBackup == "demo":
		if agentsOwn == nil {
			return nil, fmt.Errorf("--llm-backup %s: agent %q has no model of its own", p.llmBackup, agent.Name)
		}
		replace(team, agentsOwn, func(a *runtime.Agent) *llm.Model { return &a.BackupModel })
		out.roles.modelBackup = ownEngine(agentsOwn)
	case p.llmBackup != "":
		m, _, err := p.buildModel(p.llmBackup, p.tts != "" || agent.TTS != nil, out)
		if err != nil {
			return nil, fmt.Errorf("--llm-backup: %w", err)
		}
		replace(team, m, func(a *runtime.Agent) *llm.Model { return &a.BackupModel })
		out.roles.modelBackup = p.llmBackup
	case agent.BackupModel != nil:
		out.roles.modelBackup = ownEngine(agent.BackupModel)
		fill(team, agent.BackupModel, func(a *runtime.Agent) *llm.Model { return &a.BackupModel })
	}

	// The voice: none when the model speaks itself.
	voice := func(a *runtime.Agent) *tts.Synthesizer { return &a.TTS }
	switch {
	case p.tts != "":
		v, err := p.buildTTS(p.tts)
		if err != nil {
			return nil, err
		}
		replace(team, v, voice)
		out.roles.tts = p.tts
	case agent.TTS != nil:
		out.roles.tts = ownEngine(agent.TTS)
		fill(team, agent.TTS, voice)
	case rt == nil:
		name := pick("", "openai", "espeak")
		v, err := p.buildTTS(name)
		if err != nil {
			return nil, err
		}
		fill(team, v, voice)
		out.roles.tts = name
	}
	backupVoice := func(a *runtime.Agent) *tts.Synthesizer { return &a.BackupTTS }
	switch {
	case p.ttsBackup == "none":
		replace(team, nil, backupVoice)
	case p.ttsBackup != "":
		v, err := p.buildTTS(p.ttsBackup)
		if err != nil {
			return nil, fmt.Errorf("--tts-backup: %w", err)
		}
		replace(team, v, backupVoice)
		out.roles.ttsBackup = p.ttsBackup
	case agent.BackupTTS != nil:
		out.roles.ttsBackup = ownEngine(agent.BackupTTS)
		fill(team, agent.BackupTTS, backupVoice)
	case agent.TTS != nil && !isLocalVoice(agent.TTS):
		if v := p.localVoice(); v != nil {
			fill(team, tts.Synthesizer(v), backupVoice)
			out.roles.ttsBackup = "espeak"
		}
	}
	if !withSTT {
		return out, nil
	}

	// The recogniser.
	phrases := teamPhrases(team)
	recogniser := func(a *runtime.Agent) *stt.Recognizer { return &a.STT }
	switch {
	case p.stt != "":
		r, err := p.buildSTT(p.stt, phrases, rt, out)
		if err != nil {
			return nil, err
		}
		replace(team, r, recogniser)
		out.roles.stt = p.stt
	case agent.STT != nil:
		out.roles.stt = ownEngine(agent.STT)
		fill(team, agent.STT, recogniser)
	default:
		name := "realtime"
		if rt == nil {
			name = pick("", "openai", "pocketsphinx")
		}
		r, err := p.buildSTT(name, phrases, rt, out)
		if err != nil {
			return nil, err
		}
		fill(team, r, recogniser)
		out.roles.stt = name
	}
	backupRecogniser := func(a *runtime.Agent) *stt.Recognizer { return &a.BackupSTT }
	switch {
	case p.sttBackup != "":
		r, err := p.buildSTT(p.sttBackup, phrases, rt, out)
		if err != nil {
			return nil, fmt.Errorf("--stt-backup: %w", err)
		}
		replace(team, r, backupRecogniser)
		out.roles.sttBackup = p.sttBackup
	case agent.BackupSTT != nil:
		out.roles.sttBackup = ownEngine(agent.BackupSTT)
		fill(team, agent.BackupSTT, backupRecogniser)
	}
	return out, nil
}

// agentTeam is agent and every agent it may hand a call to, directly or
// through another, each once.
func agentTeam(agent *runtime.Agent) []*runtime.Agent {
	var team []*runtime.Agent
	seen := map[*runtime.Agent]bool{}
	var walk func(a *runtime.Agent)
	walk = func(a *runtime.Agent) {
		if a == nil || seen[a] {
			return
		}
		seen[a] = true
		team = append(team, a)
		for _, peer := range a.Peers {
			walk(peer)
		}
	}
	walk(agent)
	return team
}

// teamPhrases are the phrases of every agent of a team, each once, in
// order: one grammar for the whole call, since a handoff keeps the
// recogniser.
func teamPhrases(team []*runtime.Agent) []string {
	var phrases []string
	seen := map[string]bool{}
	for _, a := range team {
		for _, ph := range a.Phrases {
			if !seen[ph] {
				seen[ph] = true
				phrases = append(phrases, ph)
			}
		}
	}
	return phrases
}

// fill sets a role to v on the agents that left it empty.
func fill[T comparable](team []*runtime.Agent, v T, role func(*runtime.Agent) *T) {
	var zero T
	for _, a := range team {
		if r := role(a); *r == zero {
			*r = v
		}
	}
}

// replace sets a role to v on every agent.
func replace[T any](team []*runtime.Agent, v T, role func(*runtime.Agent) *T) {
	for _, a := range team {
		*role(a) = v
	}
}

// ownEngine names a provider the agent's Go code set, by its type, for
// the startup line.
func ownEngine(provider any) string { return fmt.Sprintf("own:%T", provider) }

// isLocalVoice reports whether v is espeak-ng, which needs no backup of
// itself.
func isLocalVoice(v tts.Synthesizer) bool {
	_, ok := v.(*espeak.Synthesizer)
	return ok
}

// localVoice is espeak-ng's voice, or nil when espeak-ng is not installed:
// then there is no local voice to fall back to, and the voice asked for
// runs alone.
func (p *providerFlags) localVoice() *espeak.Synthesizer {
	p.espeakOnce.Do(func() {
		if v, err := espeak.New(); err == nil {
			p.espeak = v
		}
	})
	return p.espeak
}

// pick is name, or the default: withKey with a key for OpenAI's own API
// (see openAIByDefault), else without.
func pick(name, withKey, without string) string {
	switch {
	case name != "":
		return name
	case openAIByDefault():
		return withKey
	}
	return without
}

func (p *providerFlags) buildModel(name string, textOut bool, out *providers) (llm.Model, *realtime.Client, error) {
	switch name {
	case "openai":
		var opts []llmopenai.Option
		if p.openAIURL != "" {
			opts = append(opts, llmopenai.WithBaseURL(p.openAIURL), llmopenai.WithAPIKey(p.openAIKey))
		}
		if p.model != "" {
			opts = append(opts, llmopenai.WithModel(p.model))
		}
		m, err := llmopenai.New(opts...)
		return m, nil, err
	case "realtime":
		var opts []realtime.Option
		if p.model != "" {
			opts = append(opts, realtime.WithModel(p.model))
		}
		if textOut {
			opts = append(opts, realtime.WithTextOutput()) // our voice speaks its text
		}
		c, err := realtime.New(opts...)
		if err != nil {
			return nil, nil, err
		}
		out.closers = append(out.closers, c)
		return c, c, nil
	}
	return nil, nil, fmt.Errorf("unknown model provider %q (have agent, openai, realtime)", name)
}

func (p *providerFlags) buildTTS(name string) (tts.Synthesizer, error) {
	switch name {
	case "espeak":
		return espeak.New()
	case "openai":
		var opts []ttsopenai.Option
		if p.openAIURL != "" {
			opts = append(opts, ttsopenai.WithBaseURL(p.openAIURL), ttsopenai.WithAPIKey(p.openAIKey))
		}
		return ttsopenai.New(opts...)
	case "demo":
		return scripted.NewTTS(scripted.WithWordsPerSecond(p.wps))
	}
	return nil, fmt.Errorf("unknown voice %q (have espeak, openai, demo)", name)
}

func (p *providerFlags) buildSTT(name string, phrases []string, rt *realtime.Client, out *providers) (stt.Recognizer, error) {
	// A recogniser made for the session is closed with it.
	closeAfter := func(r stt.Recognizer, err error) (stt.Recognizer, error) {
		if c, ok := r.(io.Closer); ok && err == nil {
			out.closers = append(out.closers, c)
		}
		return r, err
	}
	switch name {
	case "pocketsphinx":
		if len(phrases) == 0 {
			return nil, errors.New("the local recogniser (pocketsphinx) listens for the agent's phrases, and it has none: set the agent's Phrases in Go, or choose another recogniser with --stt openai")
		}
		return p.localRecognizer(phrases)
	case "openai":
		var opts []sttopenai.Option
		if p.openAIURL != "" {
			opts = append(opts, sttopenai.WithBaseURL(p.openAIURL), sttopenai.WithAPIKey(p.openAIKey))
		}
		return closeAfter(sttopenai.New(opts...))
	case "realtime":
		if rt == nil {
			return nil, errors.New("--stt realtime needs --llm realtime")
		}
		return rt.Recognizer(), nil
	case "demo":
		return scripted.NewSTT(), nil
	}
	return nil, fmt.Errorf("unknown recogniser %q (have pocketsphinx, openai, realtime, demo)", name)
}

// newAgent makes one agent with fn and gives it the session's providers;
// release closes what they hold and what the agent's own release does.
func (p *providerFlags) newAgent(ctx context.Context, fn runtime.AgentFunc, withSTT bool) (*runtime.Agent, *providers, func(), error) {
	agent, release, err := fn(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	if release == nil {
		release = func() {}
	}
	if agent == nil {
		release()
		return nil, nil, nil, errors.New("the agent function returned no agent")
	}
	prov, err := p.equip(agent, withSTT)
	if err != nil {
		release()
		return nil, nil, nil, err
	}
	return agent, prov, func() {
		prov.Close()
		release()
	}, nil
}

// agentFunc is fn with the providers the flags choose: what the
// transports call for each call.
func (p *providerFlags) agentFunc(fn runtime.AgentFunc, withSTT bool) runtime.AgentFunc {
	return func(ctx context.Context) (*runtime.Agent, func(), error) {
		agent, _, release, err := p.newAgent(ctx, fn, withSTT)
		return agent, release, err
	}
}

// probe makes one agent and releases it, so that a provider that cannot be
// made fails the command at start-up rather than at the first call, and
// says which engine each role runs on.
func (p *providerFlags) probe(ctx context.Context, fn runtime.AgentFunc, withSTT bool) (*providers, error) {
	_, prov, release, err := p.newAgent(ctx, fn, withSTT)
	if err != nil {
		return nil, err
	}
	release()
	return prov, nil
}

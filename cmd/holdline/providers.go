package main

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

	"github.com/holdline/holdline/examples/booking"
	"github.com/holdline/holdline/llm"
	llmopenai "github.com/holdline/holdline/llm/openai"
	"github.com/holdline/holdline/llm/realtime"
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
	fs.StringVar(&p.llm, "llm", "", "model `provider`: demo (offline intent model of the example agents), openai (OpenAI or any compatible server at OPENAI_BASE_URL), realtime (OpenAI Realtime, speech to speech); default openai when OPENAI_API_KEY is set and OPENAI_BASE_URL is not (OpenAI's own API), else demo")
	fs.StringVar(&p.model, "model", "", "model `NAME` for --llm openai or realtime (default gpt-4o-mini, gpt-realtime)")
	fs.StringVar(&p.stt, "stt", "", "speech recogniser: pocketsphinx (local, with the agent's grammar), openai, realtime, demo; default realtime with --llm realtime, openai with a key for OpenAI's own API, else pocketsphinx")
	fs.StringVar(&p.tts, "tts", "", "voice: espeak (local), openai, demo (a tone at a speaking pace); default none with --llm realtime (the model speaks), openai with a key for OpenAI's own API, else espeak")
	fs.StringVar(&p.llmBackup, "llm-backup", "", "model provider that takes over when the model fails before its first token")
	fs.StringVar(&p.sttBackup, "stt-backup", "", "recogniser that takes over when the recogniser fails")
	fs.StringVar(&p.ttsBackup, "tts-backup", "", "voice that takes over when the voice fails (default espeak, when installed, for any other voice; none: no backup)")
	fs.Float64Var(&p.wps, "words-per-second", 2.5, "speaking pace of --tts demo")
}

// providers are the built providers of one session.
type providers struct {
	model, backupModel llm.Model
	tts, backupTTS     tts.Synthesizer
	stt, backupSTT     stt.Recognizer
	closers            []io.Closer
	// restaurant configures the booking demo's back office.
	restaurant []booking.RestaurantOption
	// demo: the model is the example agents' offline intent model, which
	// each example provides for itself.
	demo bool
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
	if p.roles.stt == "pocketsphinx" || p.roles.sttBackup == "pocketsphinx" || p.roles.tts == "espeak" {
		return server.LocalCallCost
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

// build makes the providers for one session of an agent whose callers say
// phrases like the given ones (a local recogniser's grammar). withSTT is
// false when the session takes no audio, so no recogniser is loaded.
//
// A voice other than espeak with no --tts-backup gets espeak-ng as its
// backup when espeak-ng is installed: a voice that fails (a server without
// the speech endpoint, a wrong key) is then heard as another voice, with a
// provider_failover event, rather than not at all.
func (p *providerFlags) build(phrases []string, withSTT bool) (_ *providers, err error) {
	out := &providers{}
	defer func() {
		if err != nil {
			out.Close()
		}
	}()
	llmName := pick(p.llm, "openai", "demo")
	out.demo = llmName == "demo"
	var rt *realtime.Client
	out.model, rt, err = p.buildModel(llmName, out)
	if err != nil {
		return nil, err
	}
	out.roles.model = llmName
	if p.llmBackup != "" {
		if out.backupModel, _, err = p.buildModel(p.llmBackup, out); err != nil {
			return nil, fmt.Errorf("--llm-backup: %w", err)
		}
		out.roles.modelBackup = p.llmBackup
	}
	ttsName := p.tts
	if ttsName == "" && rt == nil {
		ttsName = pick("", "openai", "espeak")
	}
	if ttsName != "" {
		if out.tts, err = p.buildTTS(ttsName); err != nil {
			return nil, err
		}
		out.roles.tts = ttsName
	}
	switch {
	case p.ttsBackup == "none":
	case p.ttsBackup != "":
		if out.backupTTS, err = p.buildTTS(p.ttsBackup); err != nil {
			return nil, fmt.Errorf("--tts-backup: %w", err)
		}
		out.roles.ttsBackup = p.ttsBackup
	case out.tts != nil && ttsName != "espeak":
		if v := p.localVoice(); v != nil {
			out.backupTTS = v
			out.roles.ttsBackup = "espeak"
		}
	}
	if !withSTT {
		return out, nil
	}
	sttName := p.stt
	if sttName == "" && rt != nil {
		sttName = "realtime"
	}
	sttName = pick(sttName, "openai", "pocketsphinx")
	if out.stt, err = p.buildSTT(sttName, phrases, rt); err != nil {
		return nil, err
	}
	out.roles.stt = sttName
	if p.sttBackup != "" {
		if out.backupSTT, err = p.buildSTT(p.sttBackup, phrases, rt); err != nil {
			return nil, fmt.Errorf("--stt-backup: %w", err)
		}
		out.roles.sttBackup = p.sttBackup
	}
	for _, r := range []stt.Recognizer{out.stt, out.backupSTT} {
		if c, ok := r.(io.Closer); ok {
			out.closers = append(out.closers, c)
		}
	}
	return out, nil
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

func (p *providerFlags) buildModel(name string, out *providers) (llm.Model, *realtime.Client, error) {
	switch name {
	case "demo":
		return booking.NewDemoModel(), nil, nil
	case "openai":
		var opts []llmopenai.Option
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
		if p.tts != "" {
			opts = append(opts, realtime.WithTextOutput()) // our voice speaks its text
		}
		c, err := realtime.New(opts...)
		if err != nil {
			return nil, nil, err
		}
		out.closers = append(out.closers, c)
		return c, c, nil
	}
	return nil, nil, fmt.Errorf("unknown model provider %q (have demo, openai, realtime)", name)
}

func (p *providerFlags) buildTTS(name string) (tts.Synthesizer, error) {
	switch name {
	case "espeak":
		return espeak.New()
	case "openai":
		return ttsopenai.New()
	case "demo":
		return scripted.NewTTS(scripted.WithWordsPerSecond(p.wps))
	}
	return nil, fmt.Errorf("unknown voice %q (have espeak, openai, demo)", name)
}

func (p *providerFlags) buildSTT(name string, phrases []string, rt *realtime.Client) (stt.Recognizer, error) {
	switch name {
	case "pocketsphinx":
		return p.localRecognizer(phrases)
	case "openai":
		return sttopenai.New()
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

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/holdline/holdline/examples/booking"
	"github.com/holdline/holdline/llm"
	llmopenai "github.com/holdline/holdline/llm/openai"
	"github.com/holdline/holdline/llm/realtime"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/stt"
	sttopenai "github.com/holdline/holdline/stt/openai"
	"github.com/holdline/holdline/stt/pocketsphinx"
	"github.com/holdline/holdline/tts"
	"github.com/holdline/holdline/tts/espeak"
	ttsopenai "github.com/holdline/holdline/tts/openai"
)

// providerFlags choose an agent's model, recogniser and synthesiser, and
// their backups. Defaults follow the environment: with OPENAI_API_KEY set
// every role uses OpenAI (or the OpenAI-compatible server at
// OPENAI_BASE_URL); without it, everything runs on this machine.
type providerFlags struct {
	llm, model, stt, tts string
	llmBackup            string
	sttBackup, ttsBackup string
	wps                  float64
}

func (p *providerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.llm, "llm", "", "model `provider`: demo (offline intent model of the example agents), openai (OpenAI or any compatible server at OPENAI_BASE_URL), realtime (OpenAI Realtime, speech to speech); default openai when OPENAI_API_KEY is set, else demo")
	fs.StringVar(&p.model, "model", "", "model `NAME` for --llm openai or realtime (default gpt-4o-mini, gpt-realtime)")
	fs.StringVar(&p.stt, "stt", "", "speech recogniser: pocketsphinx (local, with the agent's grammar), openai, realtime, demo; default realtime with --llm realtime, openai with a key, else pocketsphinx")
	fs.StringVar(&p.tts, "tts", "", "voice: espeak (local), openai, demo (a tone at a speaking pace); default none with --llm realtime (the model speaks), openai with a key, else espeak")
	fs.StringVar(&p.llmBackup, "llm-backup", "", "model provider that takes over when the model fails before its first token")
	fs.StringVar(&p.sttBackup, "stt-backup", "", "recogniser that takes over when the recogniser fails")
	fs.StringVar(&p.ttsBackup, "tts-backup", "", "voice that takes over when the voice fails")
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
}

func (p *providers) Close() error {
	var errs []error
	for _, c := range p.closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

func haveKey() bool { return os.Getenv("OPENAI_API_KEY") != "" }

// build makes the providers for one session of an agent whose callers say
// phrases like the given ones (a local recogniser's grammar). withSTT is
// false when the session takes no audio, so no recogniser is loaded.
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
	if p.llmBackup != "" {
		if out.backupModel, _, err = p.buildModel(p.llmBackup, out); err != nil {
			return nil, fmt.Errorf("--llm-backup: %w", err)
		}
	}
	ttsName := p.tts
	if ttsName == "" && rt == nil {
		ttsName = pick("", "openai", "espeak")
	}
	if ttsName != "" {
		if out.tts, err = p.buildTTS(ttsName); err != nil {
			return nil, err
		}
	}
	if p.ttsBackup != "" {
		if out.backupTTS, err = p.buildTTS(p.ttsBackup); err != nil {
			return nil, fmt.Errorf("--tts-backup: %w", err)
		}
	}
	if !withSTT {
		return out, nil
	}
	sttName := p.stt
	if sttName == "" && rt != nil {
		sttName = "realtime"
	}
	if out.stt, err = p.buildSTT(pick(sttName, "openai", "pocketsphinx"), phrases, rt); err != nil {
		return nil, err
	}
	if p.sttBackup != "" {
		if out.backupSTT, err = p.buildSTT(p.sttBackup, phrases, rt); err != nil {
			return nil, fmt.Errorf("--stt-backup: %w", err)
		}
	}
	for _, r := range []stt.Recognizer{out.stt, out.backupSTT} {
		if c, ok := r.(io.Closer); ok {
			out.closers = append(out.closers, c)
		}
	}
	return out, nil
}

// pick is name, or the default for a machine with or without an API key.
func pick(name, withKey, without string) string {
	switch {
	case name != "":
		return name
	case haveKey():
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
		return pocketsphinx.New(pocketsphinx.WithPhrases(phrases...))
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

package cli

import (
	"flag"

	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/tts"
)

// turnFlags shape how a caller's turn ends and how soon it is answered, for
// the commands that take a caller's voice.
type turnFlags struct {
	speculate   bool
	firstPhrase int
}

func (f *turnFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.speculate, "speculate", true,
		"ask the model as soon as the caller's words are in, while the silence that ends their turn runs; "+
			"the answer plays only if the turn ends on the same words (false: ask once the turn has ended)")
	fs.IntVar(&f.firstPhrase, "first-phrase-words", tts.DefaultMinFirstPhraseWords,
		"how many words the first phrase of an answer needs before it goes to the voice at a comma, colon or dash (-1: at the end of its sentence)")
}

// options are the session options the flags set.
func (f *turnFlags) options() []runtime.Option {
	opts := []runtime.Option{runtime.WithSpeculation(f.speculate)}
	if f.firstPhrase != 0 {
		opts = append(opts, runtime.WithFirstPhrase(f.firstPhrase))
	}
	return opts
}

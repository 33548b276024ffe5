package cli

import (
	"flag"

	"github.com/holdline/holdline/runtime"
)

// turnFlags shape how a caller's turn ends and how soon it is answered, for
// the commands that take a caller's voice.
type turnFlags struct {
	speculate bool
}

func (f *turnFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.speculate, "speculate", true,
		"ask the model as soon as the caller's words are in, while the silence that ends their turn runs; "+
			"the answer plays only if the turn ends on the same words (false: ask once the turn has ended)")
}

// options are the session options the flags set.
func (f *turnFlags) options() []runtime.Option {
	return []runtime.Option{runtime.WithSpeculation(f.speculate)}
}

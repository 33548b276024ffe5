package runtime

import (
	"github.com/holdline/holdline/media/aec"
	"github.com/holdline/holdline/runtime/engine"
)

// newDefaultCanceller makes the echo canceller a session uses when none is
// configured: libspeexdsp's, through media/aec.
var newDefaultCanceller = func(rate int) (engine.EchoCanceller, error) {
	c, err := aec.New(rate)
	if err != nil {
		return nil, err
	}
	return c, nil
}

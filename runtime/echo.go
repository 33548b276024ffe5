package runtime

import "errors"

// newDefaultCanceller makes the echo canceller a session uses when none is
// configured.
var newDefaultCanceller = func(rate int) (EchoCanceller, error) {
	return nil, errors.New("no echo canceller built in yet")
}

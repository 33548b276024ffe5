package runtime

import (
	"context"
	"time"

	"github.com/holdline/holdline/runtime/engine"
)

// TransferOption configures Transfer.
type TransferOption func(*engine.TransferRequest)

// WithTransferTimeout bounds the wait for the target to answer (default
// DefaultTransferTimeout).
func WithTransferTimeout(d time.Duration) TransferOption {
	return func(r *engine.TransferRequest) { r.Timeout = d }
}

// WithHandoffToken has the transfer carry token rather than one the host
// hands out.
func WithHandoffToken(token string) TransferOption {
	return func(r *engine.TransferRequest) { r.Token = token }
}

// Transfer hands the call that ctx's session runs on to target, through
// whatever transport carries the call (a SIP REFER on a phone call); tools
// call it with their ctx, and need not know the transport. It returns nil
// once the target answered, an error when the transfer failed (the call
// goes on), and ErrTransferUnsupported when the call's transport cannot
// transfer (its owner sets how: engine.WithTransferer).
func Transfer(ctx context.Context, target string, opts ...TransferOption) error {
	s, ok := SessionFrom(ctx)
	if !ok || s.cfg.Transfer == nil {
		return ErrTransferUnsupported
	}
	req := engine.TransferRequest{Target: target, Timeout: DefaultTransferTimeout}
	for _, o := range opts {
		o(&req)
	}
	if req.Timeout <= 0 {
		req.Timeout = DefaultTransferTimeout
	}
	return s.cfg.Transfer(ctx, req)
}

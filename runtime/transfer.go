package runtime

import (
	"context"
	"errors"
	"time"
)

// ErrTransferUnsupported is returned by Transfer for a call whose
// transport cannot hand it to another party (a browser call, the
// console), or outside a session's tool.
var ErrTransferUnsupported = errors.New("runtime: this call's transport cannot transfer it")

// DefaultTransferTimeout bounds how long Transfer waits for the target to
// answer.
const DefaultTransferTimeout = 30 * time.Second

// TransferRequest is a transfer asked of a call's transport.
type TransferRequest struct {
	// Target is where the call goes, as the transport takes it: a SIP
	// URI, a telephone number.
	Target string
	// Timeout bounds the wait for the target to answer.
	Timeout time.Duration
	// Token is a handoff token the transfer carries, so that a Holdline
	// worker answering the transferred call picks the conversation up; ""
	// for none (the host hands one out itself when it has a store).
	Token string
}

// Transferer carries a transfer out on the call's transport: it returns
// nil once the target has answered (the call is then handed over and the
// session ends), or an error when the transfer failed and the call goes
// on.
type Transferer func(ctx context.Context, req TransferRequest) error

// WithTransferer sets how the session's call is transferred (Transfer); a
// transport that can transfer sets it.
func WithTransferer(t Transferer) Option {
	return func(c *config) error { c.transfer = t; return nil }
}

// TransferOption configures Transfer.
type TransferOption func(*TransferRequest)

// WithTransferTimeout bounds the wait for the target to answer (default
// DefaultTransferTimeout).
func WithTransferTimeout(d time.Duration) TransferOption {
	return func(r *TransferRequest) { r.Timeout = d }
}

// WithHandoffToken has the transfer carry token rather than one the host
// hands out.
func WithHandoffToken(token string) TransferOption {
	return func(r *TransferRequest) { r.Token = token }
}

// Transfer hands the call that ctx's session runs on to target, through
// whatever transport carries the call (a SIP REFER on a phone call); tools
// call it with their ctx, and need not know the transport. It returns nil
// once the target answered, an error when the transfer failed (the call
// goes on), and ErrTransferUnsupported when the call's transport cannot
// transfer.
func Transfer(ctx context.Context, target string, opts ...TransferOption) error {
	s, ok := SessionFrom(ctx)
	if !ok || s.cfg.transfer == nil {
		return ErrTransferUnsupported
	}
	req := TransferRequest{Target: target, Timeout: DefaultTransferTimeout}
	for _, o := range opts {
		o(&req)
	}
	if req.Timeout <= 0 {
		req.Timeout = DefaultTransferTimeout
	}
	return s.cfg.transfer(ctx, req)
}

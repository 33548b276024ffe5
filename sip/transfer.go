package sip

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	sipmsg "github.com/emiago/sipgo/sip"

	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/runtime/engine"
)

// HandoffHeader carries a handoff token with a transfer, so that a
// Holdline worker answering the transferred call can pick the
// conversation up.
const HandoffHeader = "X-Holdline-Handoff"

// DefaultTransferTimeout bounds how long Transfer waits for the transfer
// target to answer (the final NOTIFY).
const DefaultTransferTimeout = 30 * time.Second

var (
	// ErrNotACall: Transfer was called outside a phone call's session.
	ErrNotACall = errors.New("sip: not in a phone call")
	// ErrTransferFailed wraps a refused REFER or a transfer target that
	// did not answer; the call goes on.
	ErrTransferFailed = errors.New("sip: transfer failed")
)

type callKey struct{}

// callOf returns the call whose session ctx belongs to (tools and OnEnter
// run under it).
func callOf(ctx context.Context) *call {
	c, _ := ctx.Value(callKey{}).(*call)
	return c
}

// TransferOption configures Transfer.
type TransferOption func(*transferConfig)

type transferConfig struct {
	token   string
	timeout time.Duration
}

// WithHandoffToken sends token in the X-Holdline-Handoff header of the
// REFER (and so of the INVITE the other side makes to the target).
func WithHandoffToken(token string) TransferOption {
	return func(c *transferConfig) { c.token = token }
}

// WithTransferTimeout bounds the wait for the target to answer (default
// DefaultTransferTimeout).
func WithTransferTimeout(d time.Duration) TransferOption {
	return func(c *transferConfig) { c.timeout = d }
}

// Transfer hands the phone call that ctx's session runs on to target (a
// SIP URI) with a blind transfer (runtime.Transfer does the same without
// knowing the transport): a REFER to the other side, whose NOTIFYs
// report how calling the target goes. When the target answers, Holdline
// hangs up (BYE) and the session ends; when the REFER is refused or the
// target does not answer, Transfer returns an error wrapping
// ErrTransferFailed and the call goes on. Tools call it with their ctx.
func Transfer(ctx context.Context, target string, opts ...TransferOption) error {
	if callOf(ctx) == nil {
		return ErrNotACall
	}
	cfg := transferConfig{timeout: DefaultTransferTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	err := runtime.Transfer(ctx, target, runtime.WithTransferTimeout(cfg.timeout), runtime.WithHandoffToken(cfg.token))
	if err != nil && !errors.Is(err, ErrTransferFailed) {
		// The host could not checkpoint for the handoff.
		return fmt.Errorf("%w: %v", ErrTransferFailed, err)
	}
	return err
}

// Transfer carries out a transfer the session asks for (runtime.Transfer,
// through the host): a blind transfer by REFER, with the handoff token in
// the Refer-To URI and a header of its own.
func (c *call) Transfer(ctx context.Context, r engine.TransferRequest) error {
	target, cfg := r.Target, transferConfig{token: r.Token, timeout: r.Timeout}
	var to sipmsg.Uri
	if err := sipmsg.ParseUri(target, &to); err != nil {
		return fmt.Errorf("%w: target %q: %v", ErrTransferFailed, target, err)
	}
	if strings.ContainsAny(cfg.token, "\r\n") {
		return fmt.Errorf("%w: the handoff token has a line break", ErrTransferFailed)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	referTo := to.String()
	var extra []sipmsg.Header
	if cfg.token != "" {
		// RFC 3515: headers in the Refer-To URI go into the INVITE the
		// other side sends to the target.
		referTo += "?" + HandoffHeader + "=" + url.QueryEscape(cfg.token)
		extra = append(extra, sipmsg.NewHeader(HandoffHeader, cfg.token))
	}
	notify, done, err := c.refer(ctx, "<"+referTo+">", extra...)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrTransferFailed, err)
	}
	defer done()
	c.s.cfg.log.Info("transfer accepted", "call_id", c.id, "target", target)
	code, err := finalNotify(ctx, notify)
	switch {
	case err != nil:
		return fmt.Errorf("%w: no answer from the target: %v", ErrTransferFailed, err)
	case code >= 300:
		return fmt.Errorf("%w: the target answered %d", ErrTransferFailed, code)
	}
	c.s.cfg.log.Info("transferred", "call_id", c.id, "target", target)
	c.hangUp(errTransferred)
	return nil
}

// refer sends a REFER to the other side and waits for it to be accepted:
// the NOTIFYs that then report the referred call come on notify, until
// done is called. One REFER at a time.
func (c *call) refer(ctx context.Context, referTo string, extra ...sipmsg.Header) (notify <-chan int, done func(), err error) {
	ch := make(chan int, 8)
	c.mu.Lock()
	if c.notify != nil {
		c.mu.Unlock()
		return nil, nil, errors.New("a transfer is already under way")
	}
	c.notify = ch
	c.mu.Unlock()
	done = func() {
		c.mu.Lock()
		c.notify = nil
		c.mu.Unlock()
	}
	req := sipmsg.NewRequest(sipmsg.REFER, c.target)
	req.AppendHeader(sipmsg.NewHeader("Refer-To", referTo))
	req.AppendHeader(sipmsg.NewHeader("Referred-By", "<"+c.s.contactURI()+">"))
	for _, h := range extra {
		req.AppendHeader(h)
	}
	req.AppendHeader(c.s.contactOf(c))
	tx, err := c.dlg.TransactionRequest(ctx, req)
	if err != nil {
		done()
		return nil, nil, fmt.Errorf("REFER: %v", err)
	}
	defer tx.Terminate()
	for {
		select {
		case res := <-tx.Responses():
			switch {
			case res.StatusCode < 200:
			case res.StatusCode < 300:
				return ch, done, nil
			default:
				done()
				return nil, nil, fmt.Errorf("REFER answered %d %s", res.StatusCode, res.Reason)
			}
		case <-tx.Done():
			done()
			return nil, nil, fmt.Errorf("REFER: %v", tx.Err())
		case <-ctx.Done():
			done()
			return nil, nil, fmt.Errorf("REFER: %v", ctx.Err())
		}
	}
}

// finalNotify waits for the final status a referred call's NOTIFYs
// report.
func finalNotify(ctx context.Context, notify <-chan int) (int, error) {
	for {
		select {
		case code := <-notify:
			if code >= 200 {
				return code, nil
			}
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// errTransferred ends a call handed to another party.
var errTransferred = errors.New("sip: transferred")

// onNotify takes the NOTIFYs of a transfer (Event: refer): their
// message/sipfrag body is the status line of the target's answer.
func (s *Server) onNotify(req *sipmsg.Request, tx sipmsg.ServerTransaction) {
	c := s.lookup(req)
	if c == nil {
		respond(tx, req, 481, "Call/Transaction Does Not Exist", "no such call")
		return
	}
	if ev := req.GetHeader("Event"); ev == nil || !strings.HasPrefix(strings.ToLower(strings.TrimSpace(ev.Value())), "refer") {
		respond(tx, req, 489, "Bad Event", "only refer is subscribed to")
		return
	}
	code, ok := sipfragStatus(req.Body())
	if !ok {
		respond(tx, req, 400, "Bad Request", "the body must be a message/sipfrag status line")
		return
	}
	_ = tx.Respond(sipmsg.NewResponseFromRequest(req, 200, "OK", nil))
	c.mu.Lock()
	ch := c.notify
	c.mu.Unlock()
	if ch != nil {
		select {
		case ch <- code:
		default:
		}
	}
}

// sipfragStatus reads "SIP/2.0 200 OK" from a message/sipfrag body.
func sipfragStatus(body []byte) (int, bool) {
	line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
	f := strings.Fields(line)
	if len(f) < 2 || !strings.HasPrefix(f[0], "SIP/") {
		return 0, false
	}
	code, err := strconv.Atoi(f[1])
	return code, err == nil && code >= 100 && code < 700
}

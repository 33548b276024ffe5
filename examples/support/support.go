package support

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/tools"
	"github.com/holdline/holdline/tts"
)

// Instructions are the agents' system prompts.
const (
	FrontDeskInstructions = `You are the front desk of Holdline Telecom. Look the caller's account up and open a ticket
for their problem; questions about charges, refunds or invoices go to billing: transfer the caller.`
	BillingInstructions = `You are Holdline Telecom's billing desk. You see the account and the ticket the front desk
opened. Refund a duplicate charge when the caller asks. Keep answers short: they are spoken.`
)

// AccountArgs name an account.
type AccountArgs struct {
	Account string `json:"account" jsonschema:"the account number, such as A7 or 12345"`
}

// RefundArgs are refund's arguments.
type RefundArgs struct {
	Account string `json:"account" jsonschema:"the account number"`
	Amount  string `json:"amount" jsonschema:"the amount to refund, such as 19.99"`
}

// Desk is the pair of agents and the back office they share.
type Desk struct {
	FrontDesk, Billing *runtime.Agent

	mu      sync.Mutex
	refunds []RefundArgs
	tickets int
}

// Option configures the desk.
type Option func(*options)

type options struct {
	front, billing llm.Model
	voice          tts.Synthesizer
	ticketDelay    time.Duration
	context        runtime.ContextStrategy
}

// WithModels sets the agents' models (default: the demo models).
func WithModels(front, billing llm.Model) Option {
	return func(o *options) { o.front, o.billing = front, billing }
}

// WithTTS sets both agents' voice.
func WithTTS(v tts.Synthesizer) Option { return func(o *options) { o.voice = v } }

// WithTicketDelay sets how long opening a ticket takes (default 2 s): long
// enough that it is still running when the caller reaches billing.
func WithTicketDelay(d time.Duration) Option { return func(o *options) { o.ticketDelay = d } }

// WithContext sets what of the conversation billing gets (default: the
// caller's last four turns).
func WithContext(s runtime.ContextStrategy) Option { return func(o *options) { o.context = s } }

// New returns the front desk and billing, wired so the front desk can hand
// callers over.
func New(opts ...Option) *Desk {
	o := options{front: NewFrontDeskDemoModel(), billing: NewBillingDemoModel(), ticketDelay: 2 * time.Second,
		context: runtime.LastTurns(4)}
	for _, opt := range opts {
		opt(&o)
	}
	d := &Desk{}
	lookup := tools.MustNew("lookup_account", "Look an account up: plan and last charges.",
		func(ctx context.Context, a AccountArgs) (string, error) {
			return fmt.Sprintf(`{"account":%q,"plan":"pro","last_charges":["19.99","19.99"]}`, a.Account), nil
		}, tools.WithEffect(tools.Read))
	ticket := tools.MustNew("open_ticket", "Open a support ticket for the account; it runs in the background.",
		func(ctx context.Context, a AccountArgs) (string, error) {
			select {
			case <-time.After(o.ticketDelay):
			case <-ctx.Done():
				return "", ctx.Err()
			}
			d.mu.Lock()
			d.tickets++
			n := d.tickets
			d.mu.Unlock()
			return fmt.Sprintf(`{"ticket":"T-%d"}`, 1000+n), nil
		}, tools.WithEffect(tools.Read), tools.WithInterruptPolicy(tools.Detach), tools.WithTimeout(time.Minute))
	transfer := tools.MustNew("transfer_to_billing", "Hand the caller to the billing desk.",
		func(ctx context.Context, _ struct{}) (string, error) {
			s, ok := runtime.SessionFrom(ctx)
			if !ok {
				return "", fmt.Errorf("no session to hand over")
			}
			if err := s.Handoff(ctx, d.Billing, runtime.WithContext(o.context)); err != nil {
				return "", err
			}
			return "the caller is now with billing", nil
		}, tools.WithEffect(tools.Read))
	refund := tools.MustNew("refund", "Refund an amount to the account.",
		func(ctx context.Context, a RefundArgs) (string, error) {
			d.mu.Lock()
			d.refunds = append(d.refunds, a)
			d.mu.Unlock()
			return fmt.Sprintf(`{"refunded":%q}`, a.Amount), nil
		}, tools.WithEffect(tools.Mutation))
	d.FrontDesk = &runtime.Agent{Name: "front-desk", Instructions: FrontDeskInstructions, Model: o.front, TTS: o.voice,
		Tools: []*tools.Tool{lookup, ticket, transfer}, Phrases: Phrases,
		OnEnter: func(ctx context.Context, s *runtime.Session) error {
			if s.Restored() {
				return nil // the caller was greeted before the move
			}
			return s.GenerateReply(ctx, "Greet the caller.")
		}}
	d.Billing = &runtime.Agent{Name: "billing", Instructions: BillingInstructions, Model: o.billing, TTS: o.voice,
		Tools: []*tools.Tool{lookup, refund}, Phrases: Phrases}
	// A call restored after a crash comes back as whichever desk had it.
	d.FrontDesk.Peers = []*runtime.Agent{d.Billing}
	return d
}

// Refunds returns the refunds made so far.
func (d *Desk) Refunds() []RefundArgs {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]RefundArgs(nil), d.refunds...)
}

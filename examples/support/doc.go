// Package support is an agent you can copy: a front desk that looks a
// caller's account up, opens a ticket, and hands the call to billing with
// runtime.Session.Handoff. The ticket is still being opened when billing
// takes over; its number reaches billing when it lands, and the account
// lookup is already in billing's context.
//
// Both agents run offline on demo models (NewFrontDeskDemoModel,
// NewBillingDemoModel), deterministic intent models that exist so the
// example runs with no network and no key; give them a real model with
// WithModel.
package support

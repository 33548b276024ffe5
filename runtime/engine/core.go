package engine

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/tools"
)

// Edges is what the session core commands: the parts of a session that do
// I/O. Every method is called on the core's goroutine and must return at
// once; the work it starts reports back as Inputs. A runtime.Session has
// its own edges (goroutines around the agent's providers); the simulator
// has scripted ones in virtual time; a speech-to-speech backend can bring
// its own.
type Edges interface {
	// StartGeneration starts turn epoch: stream req to the model, speak
	// the answer, report ModelText, ModelDone, SpeechWords, SpeechDone and
	// PlayoutFinished for epoch.
	StartGeneration(epoch uint64, req llm.Request)
	// CancelGeneration stops turn epoch's model stream and synthesis.
	CancelGeneration(epoch uint64)
	// FlushOutput drops all queued audio of epochs <= epoch at once.
	FlushOutput(epoch uint64)
	// Played is the playout clock: how much of epoch's audio has played.
	Played(epoch uint64) time.Duration
	// RunTool runs a call's body under the tool's deadline and reports a
	// ToolOutcome (and, for a body abandoned at its deadline that finishes
	// later, a second one: the late outcome).
	RunTool(r ToolRun)
	// CancelTool cancels a running call's context (the cancel policy).
	CancelTool(callID string)
	// Reconcile runs the tool's Reconciler for r and reports a
	// ReconcileOutcome.
	Reconcile(r ToolRun)
}

// ToolRun is one call handed to Edges.
type ToolRun struct {
	CallID string
	Key    string // idempotency key
	Tool   *tools.Tool
	Args   json.RawMessage
	Epoch  uint64
	// Turn is the turn that made the call, for tools.WaitPlayout.
	Turn *Turn
	// Of is the earlier call whose unknown outcome Reconcile looks into.
	Of string
}

// Core is the session's state machine on its own: no goroutines, no I/O,
// nothing that waits. Whoever drives it feeds it Inputs one at a time and
// runs its Edges; every method is for the driver's goroutine alone.
// runtime.Session drives one with goroutines and the wall clock; the
// simulator drives one in virtual time, which is how scenarios test the
// very code that answers calls.
type Core struct{ c *conductor }

// NewCore makes a core for agent. post must queue an Input for a later
// Handle (never call Handle itself); publish receives every event.
func NewCore(agent Agent, edges Edges, post func(Input), publish func(events.Event), cfg Config) (*Core, error) {
	if edges == nil || post == nil || publish == nil {
		return nil, errors.New("runtime: NewCore needs edges, post and publish")
	}
	set, err := tools.NewSet(agent.Tools...)
	if err != nil {
		return nil, fmt.Errorf("runtime: agent tools: %w", err)
	}
	cfg = cfg.withDefaults()
	return &Core{c: &conductor{
		cfg:     cfg,
		agent:   agentOn{agent, set},
		clock:   sessionClock{cfg.Clock, cfg.Clock.Now()},
		edges:   edges,
		publish: publish,
		post:    post,
		log:     cfg.Logger.With("session", cfg.ID),
		calls:   toolCalls{ledger: tools.NewLedger(cfg.ID), byID: map[string]*callState{}},
	}}, nil
}

// NewID returns a random session id.
func NewID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "s_" + hex.EncodeToString(b[:])
}

// Start marks the session's start: event times count from here.
func (k *Core) Start() {
	k.c.clock.start = k.c.clock.Now()
	k.c.emit(events.Event{Kind: events.SessionStarted, Text: k.c.agent.Name})
}

// Handle takes one input.
func (k *Core) Handle(in Input) {
	k.c.handle(in)
	k.c.follow()
}

// Emit publishes an event of the driver's (session_resumed,
// session_ended) in the core's stream: numbered, timed and checkpointed
// as the core's own.
func (k *Core) Emit(e events.Event) { k.c.emit(e) }

// ID is the session id.
func (k *Core) ID() string { return k.c.cfg.ID }

// Epoch is the latest turn's epoch.
func (k *Core) Epoch() uint64 { return k.c.turns.epoch }

// ChatContext returns the chat context as it stands.
func (k *Core) ChatContext() llm.ChatContext { return k.c.context() }

// Calls returns the ledger's record of every call, in request order.
func (k *Core) Calls() []tools.Call { return k.c.calls.ledger.Calls() }

// Idle reports whether the agent has nothing in flight and nothing to do
// until the user acts.
func (k *Core) Idle() bool { return k.c.idleNow() }

// Restore adds mutations whose intent was journaled without an outcome:
// their outcome is unknown, and a repeat is reconciled, never run blindly.
func (k *Core) Restore(records []tools.Record) { k.c.calls.ledger.Restore(records) }

// RestoreState rebuilds the core from st, settling the calls it left
// unfinished by the journal's records (tools.Settle). Call it before the
// first input.
func (k *Core) RestoreState(st State, journal []tools.Record) { k.c.restoreState(st, journal) }

// State returns the session's state now, for a checkpoint or a handoff.
func (k *Core) State() State { return k.c.state() }

// SetUserData stores v, JSON, under key with the session's state.
func (k *Core) SetUserData(key string, v json.RawMessage) {
	if k.c.chat.userData == nil {
		k.c.chat.userData = map[string]json.RawMessage{}
	}
	k.c.chat.userData[key] = slices.Clone(v)
}

// UserData returns a copy of what is stored under key, nil if nothing.
func (k *Core) UserData(key string) json.RawMessage { return slices.Clone(k.c.chat.userData[key]) }

// Speaking reports whether a turn of the agent's holds the floor: what
// speech from the caller interrupts (InputJudge.Agent's turn).
func (k *Core) Speaking() bool { return k.c.speaking() }

// Played reports whether a turn that holds the floor has played some of its
// audio (InputJudge.Agent's played).
func (k *Core) Played() bool { return k.c.played() }

// RecentlyPlayed is the words the caller may still hear as echo: what was
// played of the turns in flight and of the latest turn that stopped, for
// InputJudge.Transcript.
func (k *Core) RecentlyPlayed() string { return k.c.recentlyPlayed() }

// NowPlaying returns the words of the playing turn that have been played
// so far (a zero Caption when nothing plays), for live captions.
func (k *Core) NowPlaying() Caption {
	c := k.c
	for _, t := range c.turns.live {
		if !t.wasCut() && !t.playoutDone() {
			return Caption{Epoch: t.epoch, Text: c.playedText(t, c.edges.Played(t.epoch))}
		}
	}
	return Caption{}
}

// EndedBy records that tool call callID ended the session (the call is
// over: runtime.EndCallTool): the call succeeded, whatever its body goes
// on to return once its context is cancelled, and nothing more is asked
// of the model. A call that is not running, or "", changes nothing.
func (k *Core) EndedBy(callID, reason string) {
	c := k.c
	if cs := c.calls.byID[callID]; callID != "" && cs != nil && !cs.rec.State.Terminal() {
		c.finishCall(cs, tools.Outcome{State: tools.StateSucceeded, Output: "the call has ended: " + reason}, "ended_the_call")
	}
}

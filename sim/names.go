package sim

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/media/aec"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/tools"
	"github.com/holdline/holdline/vad"
)

// ErrUnknownName is what the ParseError of a name the format does not know
// wraps: a key, an event kind, a state or reason an event cannot carry, a
// tool no call can have, a fault kind, an effect or an interrupt policy.
// Such a file would otherwise load and then expect, or do, something that
// cannot happen.
var ErrUnknownName = errors.New("unknown name")

// The names a scenario file may use, which both the parser and the JSON
// Schema (JSONSchema) are built from. Where the runtime has the names as
// constants they are taken from there.
var (
	scnEffects    = []string{string(tools.Read), string(tools.Mutation)}
	scnPolicies   = []string{string(tools.Complete), string(tools.Cancel), string(tools.Defer), string(tools.Detach)}
	scnFaultKinds = []string{"llm_error", "tts_error", "transport_drop"}
	// scnToolPolicies are what an inline tool's on_interrupt may say: a
	// policy, or "" for the effect's own.
	scnToolPolicies = append(slices.Clone(scnPolicies), "")
	// scnFromGoOptions are the settings of a Go tool that its script may
	// not restate, with the option that sets each.
	scnFromGoOptions = []struct{ key, option string }{
		{"effect", "tools.WithEffect"}, {"on_interrupt", "tools.WithInterruptPolicy"},
		{"timeout", "tools.WithTimeout"}, {"dedupe", "tools.WithDedupe"},
		{"speculative", "tools.WithSpeculative"},
	}

	// scnTerminalStates are the states a call ends in: what its
	// tool_terminal, tool_late_outcome and tool_committed events carry.
	scnTerminalStates = []string{
		string(tools.StateSucceeded), string(tools.StateFailed), string(tools.StateCancelled),
		string(tools.StateTimedOut), string(tools.StateUnknown),
	}

	// scnEventStates are the states each kind of event carries. Events of
	// other kinds carry none, so a state filter on them never matches.
	scnEventStates = map[events.Kind][]string{
		events.ToolTerminal:    scnTerminalStates,
		events.ToolLateOutcome: scnTerminalStates,
		events.ToolCommitted:   scnTerminalStates,
		events.EchoPath:        {aec.EchoNone.String(), aec.EchoPresent.String()},
	}

	// scnArbiterReasons are the reasons of the barge-in arbiter's decisions,
	// which the core passes on in its barge-in and transcript_ignored events.
	scnArbiterReasons = []string{
		vad.ReasonSpeech, vad.ReasonOverAgent, vad.ReasonSpeechContinued, vad.ReasonTranscript,
		vad.ReasonNotConfirmed, vad.ReasonShortSound, vad.ReasonBackchannel, vad.ReasonEchoTranscript,
		vad.ReasonUnconfirmed,
	}

	// scnPreemptReasons are why the core hands the floor to new input,
	// cutting the turns under way and discarding a speculative answer.
	scnPreemptReasons = []string{"reply", "user_input", "transport_drop", "barge_in"}

	// scnEventReasons are the reasons of the kinds whose reasons form a
	// closed set: words of the core, the arbiter, the drain and the warm
	// transfer. Kinds not here carry no reason, or an open one
	// (session_ended: whatever the agent or the app said in ending the
	// call; handoff: the context strategy, which the app names), and
	// their reason filters are not checked. The emitters' words are
	// string literals, not constants, so TestEmittedNamesAreKnown holds
	// this table to what runs emit and TestReasonTablesHoldTheEmittersWords
	// to the literals in the emitting packages' source.
	scnEventReasons = map[events.Kind][]string{
		events.UserTurn:          {"speech", "injected"},
		events.BargeInSuspected:  scnArbiterReasons,
		events.BargeInConfirmed:  scnArbiterReasons,
		events.BargeInResumed:    append(slices.Clone(scnArbiterReasons), "verdict_timeout"),
		events.TranscriptIgnored: append(slices.Clone(scnArbiterReasons), engine.NoWords),
		events.TurnInterrupted:   append(slices.Clone(scnPreemptReasons), "user_turn"),
		events.SpeculationDiscarded: append(slices.Clone(scnPreemptReasons),
			"speech", "more_words", "changed_words", "changed_context", "new_turn", "handoff"),
		events.InferenceSent: {"user_turn", "injected", "reply", "tool_result", "handoff"},
		events.ToolStarted:   {"speculative"},
		events.ToolDeduped:   {"reuse", "join"},
		events.ToolReconcile: {"started", "done", "not_done", "failed"},
		events.ToolTerminal: {"interrupted", "cancelled", "completed_despite_cancel", "not_executed",
			"unknown_tool", "invalid_arguments", "outcome_unknown", "deduped", "reconciled", "ended_the_call"},
		events.ToolCommitted:     {"late_outcome"},
		events.CheckpointSaved:   {"recovered"},
		events.ProviderError:     {engine.TurnDropped},
		events.SessionMoved:      {"drain"},
		events.TransferConnected: {"refer", "bridge"},
		events.TransferFailed:    {"declined", "no_answer", "no_decision", "hung_up", "error"},
	}
)

// scnEventKinds returns the event kinds as strings, for messages and the
// schema.
func scnEventKinds() []string {
	var out []string
	for _, k := range events.Kinds() {
		out = append(out, string(k))
	}
	return out
}

// scnMaxSuggest bounds the names worth comparing: longer is not a typo.
const scnMaxSuggest = 64

// scnNearest returns the name in names closest to s by edit distance, the
// first of equals, or "" when none is close enough to be what was meant:
// at most a third of s's letters changed.
func scnNearest(s string, names []string) string {
	if len(s) < 2 || len(s) > scnMaxSuggest {
		return ""
	}
	best, bestDist := "", len(s)/3+1
	for _, name := range names {
		if d := scnEditDistance(s, name); d < bestDist && name != s {
			best, bestDist = name, d
		}
	}
	return best
}

// scnEditDistance is the Levenshtein distance between a and b, in bytes. It
// takes len(a)*len(b) steps: scnNearest bounds a, and b is one of ours.
func scnEditDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// scnSuggest is "; did you mean X?" for the name nearest s, or "".
func scnSuggest(s string, names []string) string {
	if near := scnNearest(s, names); near != "" {
		return fmt.Sprintf("; did you mean %q?", near)
	}
	return ""
}

// scnCheckEvent says what is first wrong with the names of an
// expect.events entry, and the key it is at; "" when nothing is. An
// unknown kind hides the rest, which could only be judged against the
// wrong kind.
func scnCheckEvent(x EventExpect) (key, msg string) {
	kind := events.Kind(x.Kind)
	if !kind.Known() {
		return "kind", fmt.Sprintf("unknown event kind %q%s", x.Kind, scnSuggest(x.Kind, scnEventKinds()))
	}
	if x.State != "" {
		states, ok := scnEventStates[kind]
		switch {
		case !ok:
			return "state", fmt.Sprintf("%s events carry no state, so %q never matches", kind, x.State)
		case !slices.Contains(states, x.State):
			return "state", fmt.Sprintf("%s has no state %q%s (its states: %s)",
				kind, x.State, scnSuggest(x.State, states), strings.Join(states, ", "))
		}
	}
	if reasons, ok := scnEventReasons[kind]; ok && x.Reason != "" && !slices.Contains(reasons, x.Reason) {
		return "reason", fmt.Sprintf("%s has no reason %q%s (its reasons: %s)",
			kind, x.Reason, scnSuggest(x.Reason, reasons), strings.Join(reasons, ", "))
	}
	return "", ""
}

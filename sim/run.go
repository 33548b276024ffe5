package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/tools"
)

// Defaults of the simulator that the scenario format has no key for. The
// defaults of the keys it has are in the README's scenario section and
// in scenario.go.
const (
	// defaultModelTTFB answers requests beyond the scripted ones: an empty
	// reply (no words, no calls).
	defaultModelTTFB = 300 * time.Millisecond
	// userWordsPerSecond is how fast the simulated caller speaks when a
	// `say` has no `duration`.
	userWordsPerSecond = 3.0
	// maxSteps bounds the work of one run: a core that keeps scheduling
	// work at one instant would otherwise never let time reach the
	// timeout.
	maxSteps = 200_000
)

// Run is the result of one run of a scenario.
type Run struct {
	Seed       int64           `json:"seed"`
	Param      string          `json:"param,omitempty"`
	Value      time.Duration   `json:"value_ns,omitempty"`
	Violations []string        `json:"violations,omitempty"`
	Events     []events.Event  `json:"events,omitempty"`
	Context    llm.ChatContext `json:"-"`
	ToolRuns   map[string]int  `json:"tool_runs,omitempty"`
	Requests   int             `json:"requests"`
	End        time.Duration   `json:"end_ns"`
	// Speculation counts the run's speculative answers.
	Speculation Speculation `json:"speculation"`
}

// OK reports whether the run met every expectation and invariant.
func (r *Run) OK() bool { return len(r.Violations) == 0 }

// run is one run in progress.
type run struct {
	sc    *Scenario
	sched *sched
	core  *engine.Core
	edges *edges
	out   *Run
	tools map[string]*Tool
	steps int

	// bodies runs a Go agent's tool bodies (WithRealTools); nil when the
	// run scripts every tool.
	bodies *bodies

	// interrupted epochs, checked after every step: their audio must have
	// stopped (the core flushed the output).
	cut []uint64
	// inCore: the core is handling an input.
	inCore bool
}

// toolCache holds built tools across the runs of one scenario: building a
// tool resolves its schema, which would cost more than the run.
type toolCache map[toolKey]*tools.Tool

// toolKey is what a built tool depends on.
type toolKey struct {
	name, effect, policy string
	timeout              time.Duration
	dedupe, speculative  bool
}

var permissive = json.RawMessage(`{"type":"object"}`)

func (tc toolCache) get(t Tool) (*tools.Tool, error) {
	key := toolKey{t.Name, t.Effect, t.OnInterrupt, t.Timeout, t.Dedupe, t.Speculative}
	if got, ok := tc[key]; ok {
		return got, nil
	}
	opts := []tools.Option{tools.WithEffect(tools.Effect(t.Effect)), tools.WithTimeout(t.Timeout), tools.WithDedupe(t.Dedupe)}
	if t.OnInterrupt != "" {
		opts = append(opts, tools.WithInterruptPolicy(tools.Policy(t.OnInterrupt)))
	}
	if t.Speculative {
		opts = append(opts, tools.WithSpeculative())
	}
	// The body never runs: the scripted edges play its part.
	built, err := tools.NewRaw(t.Name, "scripted tool "+t.Name, permissive,
		tools.HandlerFunc(func(context.Context, json.RawMessage) (string, error) { return "", nil }), opts...)
	if err != nil {
		return nil, err
	}
	tc[key] = built
	return built, nil
}

// RunOnce runs sc once with seed and checks it.
func RunOnce(sc *Scenario, seed int64) *Run {
	return runOnce(sc, seed, toolCache{})
}

func runOnce(sc *Scenario, seed int64, cache toolCache) *Run {
	r := start(sc, seed, cache)
	defer r.bodies.close()
	if r.core != nil {
		r.schedule()
		r.loop()
		r.check()
	}
	return r.out
}

// coreConfig is the core's configuration for the run: the scenario's
// endpointing counts from the end of speech, the core's from the
// detector's verdict, a minSilence later.
func (r *run) coreConfig() engine.Config {
	sc, hangover := r.sc, minSilence(r.sc)
	cfg := engine.Config{ID: "sim", Clock: r.sched.clock, Endpointing: sc.VAD.Endpointing - hangover,
		Logger: slog.New(slog.DiscardHandler), NoSpeculation: !sc.Speculate}
	if sc.VAD.EndpointingMax > 0 {
		cfg.EndpointingMin, cfg.EndpointingMax = sc.VAD.EndpointingMin-hangover, sc.VAD.EndpointingMax-hangover
	}
	return cfg
}

// start builds a run of sc and starts its core; on failure the run's
// violations say why and it has no core.
func start(sc *Scenario, seed int64, cache toolCache) *run {
	r := &run{sc: sc, sched: newSched(seed), out: &Run{Seed: seed}, tools: map[string]*Tool{}}
	r.edges = newEdges(r)
	r.edges.in = newInput(r)
	agent := engine.Agent{Name: sc.Name, Instructions: sc.Agent.Instructions}
	var fresh map[string]*tools.Tool // the tools of this run's Go agent
	if sc.realTools != nil && sc.agentFunc != nil {
		b, err := newBodies(r, sc.agentFunc)
		if err != nil {
			r.violate("%v", err)
			return r
		}
		r.bodies, fresh = b, b.tools
	}
	for i := range sc.Agent.Tools {
		t := &sc.Agent.Tools[i]
		built := t.def
		switch {
		case fresh != nil:
			if built = fresh[t.Name]; built == nil {
				r.violate("Go agent %q: this run's agent has no tool %q, which the scenario was read with", sc.Agent.Go, t.Name)
				return r
			}
		case built == nil:
			var err error
			if built, err = cache.get(*t); err != nil {
				r.violate("tool %s: %v", t.Name, err)
				return r
			}
		}
		agent.Tools = append(agent.Tools, built)
		r.tools[t.Name] = t
	}
	core, err := engine.NewCore(agent, r.edges,
		func(in engine.Input) { r.sched.at(r.sched.now(), srcPosted, func() { r.handle(in) }) },
		func(e events.Event) { r.out.Events = append(r.out.Events, e) },
		r.coreConfig())
	if err != nil {
		r.violate("core: %v", err)
		return r
	}
	r.core = core
	core.Start()
	return r
}

func (r *run) toolSpec(name string) *Tool { return r.tools[name] }

func (r *run) violate(format string, args ...any) {
	r.out.Violations = append(r.out.Violations, fmt.Sprintf(format, args...))
}

// handle hands one input to the core and checks what must hold after
// every step.
func (r *run) handle(in engine.Input) {
	if r.inCore {
		// An edge answered a command at once: a live edge's answer waits
		// in the mailbox until the core is done with the input at hand,
		// so a run that did this would prove an order no call can have.
		r.violate("the simulator's edges gave the core %T while it was still handling an input (an edge must answer later)", in)
		return
	}
	n := len(r.out.Events)
	r.inCore = true
	r.core.Handle(in)
	r.inCore = false
	for _, e := range r.out.Events[n:] {
		if e.Kind == events.TurnInterrupted {
			r.cut = append(r.cut, e.Epoch)
		}
	}
	for _, ep := range r.cut {
		if r.edges.player.playingAfter(r.sched.now(), ep) {
			r.violate("at %v audio of interrupted turn %d is still queued to play (no flush)", r.sched.now(), ep)
		}
	}
	r.cut = r.cut[:0]
}

// schedule puts the caller's timeline and the faults on the clock: typed
// input goes straight to the core, sound through the caller-audio edge.
func (r *run) schedule() {
	for _, u := range r.sc.User {
		if u.Inject != "" {
			text := u.Inject
			r.sched.at(u.At, srcUser, func() { r.handle(engine.UserText{Text: text}) })
		}
	}
	r.edges.in.schedule()
	for _, f := range r.sc.Faults {
		r.sched.at(f.At, srcFault, func() { r.edges.fault(f) })
	}
}

// speechLength is how long a spoken action lasts.
func speechLength(u UserAction) time.Duration {
	if u.Duration > 0 {
		return u.Duration
	}
	words := len(strings.FieldsFunc(u.Say+u.Backchannel, unicode.IsSpace))
	return time.Duration(float64(words) / userWordsPerSecond * float64(time.Second))
}

// loop runs the clock until nothing is left to do or the timeout.
func (r *run) loop() {
	for {
		next, ok := r.sched.next()
		// Tool bodies running on goroutines get the bubble's time up to the
		// next piece of work; one that returns first comes before it.
		if r.bodies.advance(next, ok) {
			continue
		}
		if !ok || next > r.sc.Timeout {
			break
		}
		r.steps++
		if r.steps > maxSteps {
			r.violate("hang: more than %d steps by %v; the core keeps making work without time passing", maxSteps, r.sched.now())
			return
		}
		r.sched.step()
	}
	r.out.End = r.sched.now()
	if r.core.Idle() {
		return
	}
	if _, pending := r.sched.next(); pending {
		r.violate("hang: at the %v timeout the session still had work in flight (%s)", r.sc.Timeout, r.describeBusy())
	} else {
		r.violate("hang: nothing is left to happen but the session is not idle (%s)", r.describeBusy())
	}
}

func (r *run) describeBusy() string {
	var parts []string
	for _, c := range r.core.Calls() {
		if !c.State.Terminal() {
			parts = append(parts, fmt.Sprintf("call %s (%s) %s", c.ID, c.Tool, c.State))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "a turn or an answer still pending")
	}
	return strings.Join(parts, "; ")
}

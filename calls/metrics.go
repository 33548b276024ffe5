package calls

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/runtime/engine"
)

// metrics are the host's Prometheus collectors, on a registry of its own
// so that two hosts in one process (tests, a worker pool) don't collide.
// What counts calls is labelled by transport.
type metrics struct {
	reg *prometheus.Registry

	sessionsActive  *prometheus.GaugeVec
	sessionsTotal   *prometheus.CounterVec
	resumesTotal    *prometheus.CounterVec
	connectionsLost *prometheus.CounterVec
	turnsTotal      prometheus.Counter
	bargeIns        *prometheus.CounterVec
	toolOutcomes    *prometheus.CounterVec
	providerErrors  *prometheus.CounterVec
	sttTurnsDropped prometheus.Counter
	echoPaths       *prometheus.CounterVec
	echoGain        prometheus.Histogram
	responseLatency prometheus.Histogram
	toolDuration    *prometheus.HistogramVec
	rejected        *prometheus.CounterVec
	callerTurns     *prometheus.CounterVec
	speculations    *prometheus.CounterVec
	speculationWon  prometheus.Histogram
	turnStage       *prometheus.HistogramVec
	turnTokens      *prometheus.CounterVec
	moves           *prometheus.CounterVec

	// running are the tool calls under way in every call, for the
	// stuck-tool gauge.
	runMu   sync.Mutex
	running map[runningKey]runningCall
}

type runningKey struct{ session, call string }

type runningCall struct {
	tool  string
	since time.Time
}

func newMetrics(h *Host) *metrics {
	byTransport := []string{"transport"}
	m := &metrics{
		reg:     prometheus.NewRegistry(),
		running: map[runningKey]runningCall{},
		sessionsActive: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "holdline_sessions_active", Help: "Calls in progress, connected or waiting to be resumed, by transport.",
		}, byTransport),
		sessionsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdline_sessions_total", Help: "Calls started, by transport.",
		}, byTransport),
		resumesTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdline_resumes_total", Help: "Calls that picked up an earlier conversation (reconnected, put through, redialled) or came back on a new connection, by transport.",
		}, byTransport),
		connectionsLost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdline_connections_lost_total", Help: "Connections lost while their call went on, by transport.",
		}, byTransport),
		turnsTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "holdline_turns_total", Help: "Agent turns started.",
		}),
		bargeIns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdline_barge_ins_total", Help: "Barge-ins that interrupted the agent, by reason.",
		}, []string{"reason"}),
		toolOutcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdline_tool_outcomes_total", Help: "Tool calls that reached a terminal state, by tool and state.",
		}, []string{"tool", "state"}),
		sttTurnsDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "holdline_stt_turns_dropped_total",
			Help: "Caller turns lost because the recogniser gave no final transcript before the deadline: a machine running more calls than its recogniser can decode.",
		}),
		providerErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdline_provider_errors_total", Help: "Errors of the model, recogniser or voice, by provider role.",
		}, []string{"provider"}),
		echoPaths: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdline_echo_paths_total", Help: "Lines whose echo the canceller measured, by what it found: none, or present.",
		}, []string{"state"}),
		echoGain: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "holdline_echo_gain_db",
			Help:    "The measured echo's gain relative to what the agent played, in dB, on lines that echo.",
			Buckets: []float64{-40, -30, -24, -18, -12, -9, -6, -3, 0},
		}),
		responseLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "holdline_response_latency_seconds",
			Help:    "From the end of the caller's turn (end of speech, or typed input) to the agent's first audio on the line.",
			Buckets: []float64{.1, .2, .3, .5, .75, 1, 1.5, 2, 3, 5, 10},
		}),
		toolDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "holdline_tool_duration_seconds",
			Help:    "From a tool call's start to its terminal state, by tool.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"tool"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdline_requests_rejected_total", Help: "Session requests refused, by HTTP status.",
		}, []string{"status"}),
		callerTurns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdline_caller_turns_total", Help: "The caller's turns, by input: speech, or typed (injected text, a key).",
		}, []string{"input"}),
		speculations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdline_speculations_total",
			Help: "Speculative answers (asked before the caller's turn ended), by outcome: used, or discarded because the caller went on. " +
				"The hit rate is used over holdline_caller_turns_total{input=\"speech\"}.",
		}, []string{"outcome"}),
		speculationWon: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "holdline_speculation_won_seconds",
			Help:    "How much sooner a speculative answer that was used asked the model than the turn's end would have.",
			Buckets: []float64{.05, .1, .2, .3, .4, .5, .75, 1, 2},
		}),
		turnStage: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "holdline_turn_stage_seconds",
			Help: "How long each stage of an agent turn took (the turn_metrics event), by stage, agent, model and voice: " +
				"transcript, endpoint (from the caller's speech end), request, first_token, first_phrase, voice_first_audio, queued, played (each from the stage before), " +
				"voice_to_voice (the caller's speech end to the agent's first audio on the line) and overhead (Holdline's own share).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .2, .3, .5, .75, 1, 1.5, 2, 3, 5},
		}, []string{"stage", "agent", "model", "voice"}),
		turnTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdline_model_tokens_total", Help: "Tokens the model counted, by direction (in: the requests, out: the answers), agent and model, where the model reports them.",
		}, []string{"direction", "agent", "model"}),
	}
	m.moves = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "holdline_sessions_moved_total", Help: "Calls a draining worker moved to another worker, by transport.",
	}, byTransport)
	worker := prometheus.Labels{"worker": h.cfg.worker}
	m.reg.MustRegister(m.moves,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "holdline_worker_sessions", Help: "Calls this worker holds, over every transport.", ConstLabels: worker,
		}, func() float64 { return float64(h.Len()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "holdline_drain_state", Help: "Whether this worker takes calls: 0 serving, 1 draining, 2 drained.", ConstLabels: worker,
		}, func() float64 { return float64(h.DrainState()) }))
	m.reg.MustRegister(m.sessionsActive, m.sessionsTotal, m.resumesTotal, m.connectionsLost, m.turnsTotal,
		m.bargeIns, m.toolOutcomes, m.providerErrors, m.sttTurnsDropped, m.echoPaths, m.echoGain, m.responseLatency, m.toolDuration, m.rejected,
		m.callerTurns, m.speculations, m.speculationWon, m.turnStage, m.turnTokens,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}),
		frameCollector{h}, runningCollector{m})
	return m
}

// started counts a call that started (resumed: it picks up an earlier
// conversation).
func (m *metrics) started(kind string, resumed bool) {
	m.sessionsTotal.WithLabelValues(kind).Inc()
	m.sessionsActive.WithLabelValues(kind).Inc()
	if resumed {
		m.resumesTotal.WithLabelValues(kind).Inc()
	}
}

// Resumed counts a call that came back on a new connection of its
// transport (a reloaded page with its resume token).
func (c *Call) Resumed() { c.h.metrics.resumesTotal.WithLabelValues(c.kind).Inc() }

// frameCollector reports the output and input frame counters of every
// call, live and ended, by transport.
type frameCollector struct{ h *Host }

var (
	missedDesc = prometheus.NewDesc("holdline_output_frames_missed_total",
		"Output frame periods that went without a frame because a session ran late (an overloaded machine), by transport.", []string{"transport"}, nil)
	lateDesc = prometheus.NewDesc("holdline_output_frames_late_total",
		"Output frames sent a frame period or more behind their slot, caught up rather than lost (a busy machine), by transport.", []string{"transport"}, nil)
	unheardDesc = prometheus.NewDesc("holdline_input_frames_unheard_total",
		"Caller audio frames the recogniser refused because it fell behind or failed: words lost, by transport.", []string{"transport"}, nil)
	packetsDesc = prometheus.NewDesc("holdline_input_packets_total",
		"The caller's audio packets by what became of them, on transports that count them (webrtc): received; lost (missing at their playout time), "+
			"of those fec_recovered (rebuilt from the next packet's FEC); late (dropped: after their slot was played); duplicate; "+
			"and concealed, the frame periods filled by loss concealment.", []string{"transport", "result"}, nil)
	jitterDesc = prometheus.NewDesc("holdline_input_jitter_delay_seconds",
		"The largest delay a live call's receive jitter buffer adds now, by transport: part of every barge-in's and turn's latency.", []string{"transport"}, nil)
)

func (f frameCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- missedDesc
	ch <- lateDesc
	ch <- unheardDesc
	ch <- packetsDesc
	ch <- jitterDesc
}

func (f frameCollector) Collect(ch chan<- prometheus.Metric) {
	for _, k := range f.h.kinds() {
		t := f.h.frames(k)
		ch <- prometheus.MustNewConstMetric(missedDesc, prometheus.CounterValue, float64(t.missed), k)
		ch <- prometheus.MustNewConstMetric(lateDesc, prometheus.CounterValue, float64(t.late), k)
		ch <- prometheus.MustNewConstMetric(unheardDesc, prometheus.CounterValue, float64(t.unheard), k)
		if !t.hasNet {
			continue
		}
		for _, r := range []struct {
			result string
			n      uint64
		}{
			{"received", t.net.PacketsReceived}, {"lost", t.net.Lost}, {"fec_recovered", t.net.FECRecovered},
			{"late", t.net.Late}, {"duplicate", t.net.Duplicates}, {"concealed", t.net.Concealed},
		} {
			ch <- prometheus.MustNewConstMetric(packetsDesc, prometheus.CounterValue, float64(r.n), k, r.result)
		}
		ch <- prometheus.MustNewConstMetric(jitterDesc, prometheus.GaugeValue, t.net.JitterDelay.Seconds(), k)
	}
}

// observer turns one session's events into metrics. It lives on the
// session's event pump goroutine.
type observer struct {
	m       *metrics
	session string
	// turnEnd is when the caller's latest turn ended, on the session
	// clock; zero when no answer is awaited.
	turnEnd   time.Duration
	toolStart map[string]time.Duration
}

func (m *metrics) observer(kind string) *observer {
	return &observer{m: m, toolStart: map[string]time.Duration{}}
}

func (o *observer) observe(e events.Event) {
	m := o.m
	switch e.Kind {
	case events.SpeechStopped:
		o.turnEnd = e.At
	case events.UserTurn:
		if e.Reason == "injected" || o.turnEnd == 0 {
			o.turnEnd = e.At
		}
		input := "typed"
		if e.Reason == "speech" {
			input = "speech"
		}
		m.callerTurns.WithLabelValues(input).Inc()
	case events.SpeculationUsed:
		m.speculations.WithLabelValues("used").Inc()
		m.speculationWon.Observe(e.Delay.Seconds())
	case events.SpeculationDiscarded:
		m.speculations.WithLabelValues("discarded").Inc()
	case events.SpeechStarted:
		o.turnEnd = 0
	case events.TurnStarted:
		m.turnsTotal.Inc()
	case events.PlayoutStarted:
		if o.turnEnd > 0 && e.At >= o.turnEnd {
			m.responseLatency.Observe((e.At - o.turnEnd).Seconds())
		}
		o.turnEnd = 0
	case events.BargeInConfirmed:
		m.bargeIns.WithLabelValues(e.Reason).Inc()
	case events.TurnMetrics:
		if t := e.Turn; t != nil {
			for _, st := range t.Breakdown() {
				m.turnStage.WithLabelValues(st.Name, t.Agent, t.Model, t.Voice).Observe(st.Took.Seconds())
			}
			if t.TokensIn > 0 || t.TokensOut > 0 {
				m.turnTokens.WithLabelValues("in", t.Agent, t.Model).Add(float64(t.TokensIn))
				m.turnTokens.WithLabelValues("out", t.Agent, t.Model).Add(float64(t.TokensOut))
			}
		}
	case events.ToolStarted:
		o.toolStart[e.CallID] = e.At
		o.session = e.Session
		m.runMu.Lock()
		m.running[runningKey{e.Session, e.CallID}] = runningCall{tool: e.Tool, since: e.Time}
		m.runMu.Unlock()
	case events.ToolTerminal:
		m.toolOutcomes.WithLabelValues(e.Tool, e.State).Inc()
		m.runMu.Lock()
		delete(m.running, runningKey{e.Session, e.CallID})
		m.runMu.Unlock()
		if at, ok := o.toolStart[e.CallID]; ok {
			m.toolDuration.WithLabelValues(e.Tool).Observe((e.At - at).Seconds())
			delete(o.toolStart, e.CallID)
		}
	case events.ProviderError:
		m.providerErrors.WithLabelValues(e.Provider).Inc()
		if e.Provider == "stt" && e.Reason == engine.TurnDropped {
			m.sttTurnsDropped.Inc()
		}
	case events.EchoPath:
		m.echoPaths.WithLabelValues(e.State).Inc()
		if e.State == "present" {
			m.echoGain.Observe(e.GainDB)
		}
	}
}

// close forgets the session's tool calls still running: its call is over.
func (o *observer) close() {
	if o.session == "" {
		return
	}
	o.m.runMu.Lock()
	defer o.m.runMu.Unlock()
	for k := range o.m.running {
		if k.session == o.session {
			delete(o.m.running, k)
		}
	}
}

// runningCollector reports the tool calls under way, by tool: how many,
// and how long the oldest has run, which is what a stuck tool shows as
// (every tool has a timeout, but a long one hides a hung backend for its
// whole length).
type runningCollector struct{ m *metrics }

var (
	runningDesc = prometheus.NewDesc("holdline_tool_calls_running",
		"Tool calls under way, by tool.", []string{"tool"}, nil)
	oldestDesc = prometheus.NewDesc("holdline_tool_call_oldest_running_seconds",
		"How long the oldest tool call under way has run, by tool: a stuck tool keeps it growing.", []string{"tool"}, nil)
)

func (r runningCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- runningDesc
	ch <- oldestDesc
}

func (r runningCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	count := map[string]int{}
	oldest := map[string]time.Time{}
	r.m.runMu.Lock()
	for _, c := range r.m.running {
		count[c.tool]++
		if o, ok := oldest[c.tool]; !ok || c.since.Before(o) {
			oldest[c.tool] = c.since
		}
	}
	r.m.runMu.Unlock()
	for tool, n := range count {
		ch <- prometheus.MustNewConstMetric(runningDesc, prometheus.GaugeValue, float64(n), tool)
		ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, max(now.Sub(oldest[tool]).Seconds(), 0), tool)
	}
}

package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/runtime"
)

// metrics are the server's Prometheus collectors, on a registry of its own
// so that two servers in one process (tests, a worker pool) don't collide.
type metrics struct {
	reg *prometheus.Registry

	sessionsActive  prometheus.Gauge
	sessionsTotal   prometheus.Counter
	resumesTotal    prometheus.Counter
	connectionsLost prometheus.Counter
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
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		sessionsActive: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "holdline_sessions_active", Help: "Sessions in progress, connected or waiting to be resumed.",
		}),
		sessionsTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "holdline_sessions_total", Help: "Sessions started.",
		}),
		resumesTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "holdline_resumes_total", Help: "Sessions resumed on a new connection.",
		}),
		connectionsLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "holdline_connections_lost_total", Help: "Connections lost while their session went on.",
		}),
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
	}
	m.reg.MustRegister(m.sessionsActive, m.sessionsTotal, m.resumesTotal, m.connectionsLost, m.turnsTotal,
		m.bargeIns, m.toolOutcomes, m.providerErrors, m.sttTurnsDropped, m.echoPaths, m.echoGain, m.responseLatency, m.toolDuration, m.rejected,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

// observer turns one session's events into metrics. It lives on the
// session's event pump goroutine.
type observer struct {
	m *metrics
	// turnEnd is when the caller's latest turn ended, on the session
	// clock; zero when no answer is awaited.
	turnEnd   time.Duration
	toolStart map[string]time.Duration
}

func (m *metrics) observer() *observer {
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
	case events.ToolStarted:
		o.toolStart[e.CallID] = e.At
	case events.ToolTerminal:
		m.toolOutcomes.WithLabelValues(e.Tool, e.State).Inc()
		if at, ok := o.toolStart[e.CallID]; ok {
			m.toolDuration.WithLabelValues(e.Tool).Observe((e.At - at).Seconds())
			delete(o.toolStart, e.CallID)
		}
	case events.ProviderError:
		m.providerErrors.WithLabelValues(e.Provider).Inc()
		if e.Provider == "stt" && e.Reason == runtime.TurnDropped {
			m.sttTurnsDropped.Inc()
		}
	case events.EchoPath:
		m.echoPaths.WithLabelValues(e.State).Inc()
		if e.State == "present" {
			m.echoGain.Observe(e.GainDB)
		}
	}
}

package calls

import "time"

// NetworkReporter is a Line that counts what the network did to the
// caller's audio on its way in (WebRTC's jitter buffer does). The host
// lists the counts with the call (Info.Network) and sums them by transport
// in the metrics, live calls and ended ones, so that the totals never go
// back. Network is called from any goroutine and must not block; its
// counters must only grow over the call.
type NetworkReporter interface {
	Network() Network
}

// Network is what the network did to a call's incoming audio.
type Network struct {
	// PacketsReceived counts the packets that arrived.
	PacketsReceived uint64 `json:"packets_received"`
	// Lost counts packets missing at their playout time (never received,
	// or received late); FECRecovered those of them rebuilt from the next
	// packet's forward error correction.
	Lost         uint64 `json:"lost"`
	FECRecovered uint64 `json:"fec_recovered"`
	// Concealed counts the frame periods filled by loss concealment.
	Concealed uint64 `json:"concealed"`
	// Late counts packets dropped because they came after their slot was
	// played; Duplicates, packets received twice.
	Late       uint64 `json:"late"`
	Duplicates uint64 `json:"duplicates"`
	// JitterDelay is the delay the receive jitter buffer adds now.
	JitterDelay time.Duration `json:"-"`
	// JitterDelayMS is JitterDelay in milliseconds, for JSON.
	JitterDelayMS float64 `json:"jitter_delay_ms"`
}

// Add adds n's counters to m's; the jitter delay is the larger of the two:
// a transport sums the connections of a call with it.
func (m *Network) Add(n Network) {
	m.PacketsReceived += n.PacketsReceived
	m.Lost += n.Lost
	m.FECRecovered += n.FECRecovered
	m.Concealed += n.Concealed
	m.Late += n.Late
	m.Duplicates += n.Duplicates
	m.JitterDelay = max(m.JitterDelay, n.JitterDelay)
}

// network returns the call's network counts, if its line reports them.
func (c *Call) network() (Network, bool) {
	r, ok := c.line.(NetworkReporter)
	if !ok {
		return Network{}, false
	}
	n := r.Network()
	n.JitterDelayMS = float64(n.JitterDelay) / float64(time.Millisecond)
	return n, true
}

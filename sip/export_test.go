package sip

import (
	"errors"
	"time"

	sipmsg "github.com/emiago/sipgo/sip"
)

// SendHistogram is the server's RTP send-spacing histogram so far, for
// measuring a window of a test: SpacingQuantile of the difference of two.
func SendHistogram(s *Server) []uint64 { return s.pacer.histogram() }

// SpacingQuantile is quantile, for tests.
func SpacingQuantile(hist []uint64, q float64) (time.Duration, uint64) { return quantile(hist, q) }

// PacerCounts says how often the pacer woke late or skipped beats, and,
// over the calls in progress, how many beats found a call's packet missing
// and how many packets were dropped.
func PacerCounts(s *Server) (late, missed, gaps, dropped uint64) {
	late, missed = s.pacer.late()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.calls {
		st := c.leg.Stats()
		gaps += st.Gaps
		dropped += st.Dropped
	}
	return late, missed, gaps, dropped
}

// LineKey is lineKey for a raw request.
func LineKey(raw string) (string, bool, error) {
	m, err := sipmsg.ParseMessage([]byte(raw))
	if err != nil {
		return "", false, err
	}
	req, ok := m.(*sipmsg.Request)
	if !ok {
		return "", false, errors.New("not a request")
	}
	k, ok := lineKey(req)
	return k, ok, nil
}

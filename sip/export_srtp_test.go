package sip

import "fmt"

// CallMedia is what a test sees of a call's media: the SDP the server
// answers it with now, whether it is SRTP, and its leg's counters.
type CallMedia struct {
	SDP                                    []byte
	SRTP                                   bool
	PacketsIn, PacketsOut, Bad, SRTPFailed uint64
}

// Media describes the calls in progress.
func Media(s *Server) []CallMedia {
	s.mu.Lock()
	calls := make([]*call, 0, len(s.calls))
	for _, c := range s.calls {
		calls = append(calls, c)
	}
	s.mu.Unlock()
	out := make([]CallMedia, 0, len(calls))
	for _, c := range calls {
		st := c.leg.Stats()
		out = append(out, CallMedia{SDP: c.answerSDP(false), SRTP: c.leg.sec.Load() != nil,
			PacketsIn: st.PacketsIn, PacketsOut: st.PacketsOut, Bad: st.Bad, SRTPFailed: st.SRTPFailed})
	}
	return out
}

// String is m without its SDP, for test failures.
func (m CallMedia) String() string {
	return fmt.Sprintf("{SRTP:%v in:%d out:%d bad:%d srtp-failed:%d}", m.SRTP, m.PacketsIn, m.PacketsOut, m.Bad, m.SRTPFailed)
}

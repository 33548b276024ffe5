package livekit

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	lkproto "github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/events"
)

// captionEvery is how often the words played so far of the agent's
// segment are sent: the agent's transcription follows its voice.
const captionEvery = 100 * time.Millisecond

// forward turns the call's events into LiveKit's conventions until the
// call ends: lk.agent.state, the caller's transcriptions, and the agent's
// words as they are played.
func (r *room) forward(hc *calls.Call) {
	f := forwarder{r: r, hc: hc}
	f.setState(StateListening)
	tick := time.NewTicker(captionEvery)
	defer tick.Stop()
	var seq uint64
	for {
		evs, wake, closed := hc.Events(seq)
		for _, e := range evs {
			f.event(e)
			seq = e.Seq
		}
		if closed {
			f.endAgentSegment("")
			return
		}
		select {
		case <-wake:
		case <-hc.Done():
			// The last events (session_ended) may still come.
			if _, _, closed := hc.Events(seq); !closed {
				select {
				case <-wake:
					continue
				case <-time.After(callTimeout):
				}
			}
			f.endAgentSegment("")
			return
		case <-tick.C:
			f.caption()
		}
	}
}

// forwarder is forward's state.
type forwarder struct {
	r  *room
	hc *calls.Call

	userSegment string // the caller's current segment id ("" between utterances)

	agent      *textStream // the agent's segment being played, if any
	agentEpoch uint64
}

func (f *forwarder) event(e events.Event) {
	switch e.Kind {
	case events.Transcript:
		f.userTranscript(e.Text, e.Final)
	case events.UserTurn:
		f.setState(StateThinking)
	case events.TurnStarted:
		if f.agent == nil {
			f.setState(StateThinking)
		}
	case events.PlayoutStarted:
		f.setState(StateSpeaking)
		f.agentEpoch = e.Epoch
	case events.PlayoutDone, events.PlayoutTruncate:
		// Text is what was said (all of it, or what was played of a cut
		// turn): the segment ends there. The agent may have more to do
		// (a tool runs after its preamble, an answer follows a filler):
		// it listens once idle.
		f.endAgentSegment(e.Text)
		f.setState(StateThinking)
	case events.TurnInterrupted, events.BargeInConfirmed:
		f.setState(StateListening)
	case events.Idle:
		f.setState(StateListening)
	}
}

// setState sets lk.agent.state when it changes.
func (f *forwarder) setState(s string) {
	r := f.r
	r.mu.Lock()
	same := r.state == s
	r.state = s
	r.mu.Unlock()
	if same {
		return
	}
	if lk := r.lk.Load(); lk != nil {
		lk.LocalParticipant.SetAttributes(map[string]string{AttrAgentState: s})
	}
}

// userTranscript sends the caller's words under the caller's identity: an
// interim result and the final one share their segment id.
func (f *forwarder) userTranscript(text string, final bool) {
	text = strings.TrimSpace(text)
	if text == "" {
		return
	}
	if f.userSegment == "" {
		f.userSegment = "SG_" + uuid.NewString()[:12]
	}
	r := f.r
	r.mu.Lock()
	caller, track := r.caller, r.callerPub
	r.mu.Unlock()
	attrs := map[string]string{
		AttrSegmentID:         f.userSegment,
		AttrTranscribedTrack:  track,
		AttrTranscriptionDone: strconv.FormatBool(final),
	}
	if lk := r.lk.Load(); lk != nil {
		s, err := openText(lk.LocalParticipant, TopicTranscription, caller, attrs)
		if err == nil {
			err = s.write(text)
		}
		if err == nil {
			err = s.close(nil)
		}
		if err != nil {
			r.log.Debug("the caller's transcription was not sent", "err", err)
		}
	}
	if final {
		f.userSegment = ""
	}
}

// caption sends the words played so far of the agent's segment.
func (f *forwarder) caption() {
	if !f.hc.Playing() {
		return
	}
	ctx, cancel := context.WithTimeout(f.hc.Context(), callTimeout)
	now, err := f.hc.Session().NowPlaying(ctx)
	cancel()
	if err != nil || now.Text == "" {
		return
	}
	if f.agent != nil && now.Epoch != f.agentEpoch {
		f.endAgentSegment("")
	}
	f.agentEpoch = now.Epoch
	f.agentWords(now.Text)
}

// agentWords sends what of played is not sent yet, opening the segment's
// stream at its first words.
func (f *forwarder) agentWords(played string) {
	r := f.r
	if f.agent == nil {
		lk := r.lk.Load()
		if lk == nil {
			return
		}
		attrs := map[string]string{
			AttrSegmentID:         "SG_" + uuid.NewString()[:12],
			AttrTranscribedTrack:  r.agentTrack.Load().(string),
			AttrTranscriptionDone: "false",
		}
		s, err := openText(lk.LocalParticipant, TopicTranscription, "", attrs)
		if err != nil {
			r.log.Debug("the agent's transcription was not sent", "err", err)
			return
		}
		f.agent = s
	}
	if !strings.HasPrefix(played, f.agent.text) {
		return // the words were re-cut; the stream keeps what it said
	}
	if delta := played[len(f.agent.text):]; delta != "" {
		if err := f.agent.write(delta); err != nil {
			r.log.Debug("the agent's transcription was not sent", "err", err)
		}
	}
}

// endAgentSegment ends the agent's segment at said (what was played of
// it; "" for what was sent so far).
func (f *forwarder) endAgentSegment(said string) {
	if said != "" {
		f.agentWords(said)
	}
	if f.agent == nil {
		return
	}
	if err := f.agent.close(map[string]string{AttrTranscriptionDone: "true"}); err != nil {
		f.r.log.Debug("the agent's transcription was not ended", "err", err)
	}
	f.agent = nil
}

// textStream is one text stream of LiveKit's data streams: a header,
// chunks, a trailer. It is written here rather than with the SDK's
// writer so that the caller's words can carry the caller's identity (the
// server lets an agent do that) and the agent's follow its voice chunk by
// chunk.
type textStream struct {
	lp       *lksdk.LocalParticipant
	id       string
	identity string
	next     uint64
	text     string // what was written so far
}

// rawPacket publishes a data packet as it is.
type rawPacket struct{ p *lkproto.DataPacket }

func (p rawPacket) ToProto() *lkproto.DataPacket { return p.p }

func openText(lp *lksdk.LocalParticipant, topic, identity string, attrs map[string]string) (*textStream, error) {
	s := &textStream{lp: lp, id: uuid.NewString(), identity: identity}
	err := s.send(&lkproto.DataPacket{Value: &lkproto.DataPacket_StreamHeader{StreamHeader: &lkproto.DataStream_Header{
		StreamId:   s.id,
		Timestamp:  time.Now().UnixMilli(),
		Topic:      topic,
		MimeType:   "text/plain",
		Attributes: attrs,
		ContentHeader: &lkproto.DataStream_Header_TextHeader{TextHeader: &lkproto.DataStream_TextHeader{
			OperationType: lkproto.DataStream_CREATE,
		}},
	}}})
	return s, err
}

func (s *textStream) write(text string) error {
	err := s.send(&lkproto.DataPacket{Value: &lkproto.DataPacket_StreamChunk{StreamChunk: &lkproto.DataStream_Chunk{
		StreamId: s.id, ChunkIndex: s.next, Content: []byte(text),
	}}})
	s.next++
	s.text += text
	return err
}

func (s *textStream) close(attrs map[string]string) error {
	return s.send(&lkproto.DataPacket{Value: &lkproto.DataPacket_StreamTrailer{StreamTrailer: &lkproto.DataStream_Trailer{
		StreamId: s.id, Attributes: attrs,
	}}})
}

// send publishes p, reliably, under the stream's identity.
func (s *textStream) send(p *lkproto.DataPacket) error {
	p.ParticipantIdentity = s.identity
	return s.lp.PublishDataPacket(rawPacket{p}, lksdk.WithDataPublishReliable(true))
}

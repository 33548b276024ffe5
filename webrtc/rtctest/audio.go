package rtctest

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/hraban/opus"
	pion "github.com/pion/webrtc/v4"
	pionmedia "github.com/pion/webrtc/v4/pkg/media"
)

// Loud is the level (RMS, 0..1 of full scale) above which a packet of the
// microphone counts as sound for Onsets and Offsets.
const Loud = 0.01

// Microphone is a caller's microphone on a WebRTC track: audio queued with
// Say goes out as 20 ms Opus packets at real time, silence when nothing is
// queued, as a browser sends. It notes when it went from silence to sound
// and back, so that a test knows when the caller spoke as the far end was
// sent it. Client has one; a caller on another server (a LiveKit room)
// makes its own and publishes Track.
type Microphone struct {
	track *pion.TrackLocalStaticSample

	mu       sync.Mutex
	queued   [][]int16 // 20 ms frames waiting to be sent
	onsets   []time.Time
	offsets  []time.Time
	lastLoud time.Time // when the last frame with sound was sent
	sending  bool      // the last frame sent had sound
}

// NewMicrophone returns a microphone sending on a new Opus track with the
// stream id given.
func NewMicrophone(streamID string) (*Microphone, error) {
	track, err := pion.NewTrackLocalStaticSample(pion.RTPCodecCapability{MimeType: pion.MimeTypeOpus, ClockRate: rate, Channels: 2}, "audio", streamID)
	if err != nil {
		return nil, err
	}
	return &Microphone{track: track}, nil
}

// Track is the track the microphone sends on.
func (m *Microphone) Track() *pion.TrackLocalStaticSample { return m.track }

// Run sends a packet every 20 ms until stop is closed.
func (m *Microphone) Run(stop <-chan struct{}) {
	enc, err := opus.NewEncoder(rate, 1, opus.AppVoIP)
	if err != nil {
		return
	}
	silence := make([]int16, frame)
	buf := make([]byte, 1500)
	t := time.NewTicker(frameTime)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		m.mu.Lock()
		pcm := silence
		if len(m.queued) > 0 {
			pcm, m.queued = m.queued[0], m.queued[1:]
		}
		loud := rms(pcm) > Loud
		now := time.Now()
		switch {
		case loud && !m.sending:
			m.onsets = append(m.onsets, now)
		case !loud && m.sending:
			m.offsets = append(m.offsets, m.lastLoud)
		}
		if loud {
			m.lastLoud = now
		}
		m.sending = loud
		m.mu.Unlock()
		n, err := enc.Encode(pcm, buf)
		if err != nil {
			continue
		}
		_ = m.track.WriteSample(pionmedia.Sample{Data: append([]byte(nil), buf[:n]...), Duration: frameTime})
	}
}

// Say queues 48 kHz audio, after what is queued; it is sent in 20 ms
// packets at real time.
func (m *Microphone) Say(samples []int16) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for len(samples) > 0 {
		f := make([]int16, frame)
		n := copy(f, samples)
		samples = samples[n:]
		m.queued = append(m.queued, f)
	}
}

// Onsets returns when the microphone went from silence to sound.
func (m *Microphone) Onsets() []time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.onsets)
}

// Offsets returns when the microphone went from sound to silence: each
// time, the moment the last packet with sound was sent.
func (m *Microphone) Offsets() []time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.offsets)
}

// Speaker decodes the agent's Opus and notes the level of every packet.
type Speaker struct {
	heard func() // called after each packet's level is noted; may be nil

	mu     sync.Mutex
	levels []Level
}

// NewSpeaker returns a speaker; heard, if not nil, is called after each
// packet is noted (to wake a waiter).
func NewSpeaker(heard func()) *Speaker { return &Speaker{heard: heard} }

// Listen decodes tr until it ends.
func (s *Speaker) Listen(tr *pion.TrackRemote) { s.listen(tr, 0) }

// listen decodes tr, the track of connection n, until it ends.
func (s *Speaker) listen(tr *pion.TrackRemote, n int) {
	dec, err := opus.NewDecoder(rate, 1)
	if err != nil {
		return
	}
	pcm := make([]int16, 6*frame)
	for {
		pkt, _, err := tr.ReadRTP()
		if err != nil {
			return
		}
		samples, err := dec.Decode(pkt.Payload, pcm)
		if err != nil {
			continue
		}
		lv := Level{At: time.Now(), RMS: rms(pcm[:samples]), Timestamp: pkt.Timestamp, Conn: n}
		s.mu.Lock()
		s.levels = append(s.levels, lv)
		s.mu.Unlock()
		if s.heard != nil {
			s.heard()
		}
	}
}

// Levels returns the level of every packet received, in order.
func (s *Speaker) Levels() []Level {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.levels)
}

func rms(s []int16) float64 {
	if len(s) == 0 {
		return 0
	}
	var sum float64
	for _, v := range s {
		f := float64(v) / 32768
		sum += f * f
	}
	return math.Sqrt(sum / float64(len(s)))
}

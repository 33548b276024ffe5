package opusrtp

import (
	"errors"
	"math"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hraban/opus"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/vad"
)

// recorder is an RTPWriter that keeps what it is given, or fails.
type recorder struct {
	pkts []rtp.Packet
	err  error
}

func (r *recorder) WriteRTP(p *rtp.Packet) error {
	if r.err != nil {
		return r.err
	}
	// The sender reuses its payload buffer: a writer that keeps a packet
	// copies it, as pion's track does by marshalling it at once.
	c := *p
	c.Payload = slices.Clone(p.Payload)
	r.pkts = append(r.pkts, c)
	return nil
}

// tone is one 20 ms frame at rate of 200 Hz, a whole number of periods
// per frame so that frames join smoothly.
func tone(rate int) media.Frame {
	s := make([]int16, rate/50)
	for i := range s {
		s[i] = int16(0.3 * 32767 * math.Sin(2*math.Pi*200*float64(i)/float64(rate)))
	}
	return media.Frame{SampleRate: rate, Samples: s}
}

func quiet(rate int) media.Frame {
	return media.Frame{SampleRate: rate, Samples: make([]int16, rate/50)}
}

// After sound, ten packets of silence go out and then nothing; the next
// sound starts a talkspurt: marker bit set, timestamp moved on by the time
// the sender was quiet, sequence numbers unbroken.
func TestSenderPausesInSilenceAndResumesWithATalkspurt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w recorder
		s := NewSender(&w)
		s.SetConnected(true)
		script := slices.Concat(
			slices.Repeat([]media.Frame{tone(media.Rate24k)}, 10),
			slices.Repeat([]media.Frame{quiet(media.Rate24k)}, 40),
			slices.Repeat([]media.Frame{tone(media.Rate24k)}, 10))
		for _, f := range script {
			if err := s.WriteFrame(f); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond) // the player's pace
		}
		if st := s.Stats(); st.Sent != 30 || st.Paused != 30 || st.Dropped != 0 {
			t.Errorf("stats %+v; want 30 sent, 30 paused", st)
		}
		if len(w.pkts) != 30 {
			t.Fatalf("%d packets; want 30 (10 of sound, 10 of silence, 10 of sound)", len(w.pkts))
		}
		for i, p := range w.pkts {
			if p.PayloadType != DefaultPayloadType || p.Version != 2 {
				t.Errorf("packet %d: payload type %d, version %d", i, p.PayloadType, p.Version)
			}
			if i > 0 && p.SequenceNumber != w.pkts[i-1].SequenceNumber+1 {
				t.Errorf("packet %d: sequence %d after %d", i, p.SequenceNumber, w.pkts[i-1].SequenceNumber)
			}
			if want := i == 0 || i == 20; p.Marker != want {
				t.Errorf("packet %d: marker %v; want %v", i, p.Marker, want)
			}
			if i > 0 && i != 20 && p.Timestamp-w.pkts[i-1].Timestamp != opusFrame {
				t.Errorf("packet %d: timestamp +%d; want +%d", i, p.Timestamp-w.pkts[i-1].Timestamp, opusFrame)
			}
		}
		// Packet 20 is the 51st frame: 30 packets' time after packet 19.
		if jump := w.pkts[20].Timestamp - w.pkts[19].Timestamp; jump != 31*opusFrame {
			t.Errorf("the talkspurt's timestamp moved %d ticks; want %d", jump, 31*opusFrame)
		}
	})
}

// The encoder codes at the frame's own rate where Opus takes it, and
// resamples the others; either way a packet is 20 ms of the frames' audio.
func TestSenderEncodesAtTheFramesRate(t *testing.T) {
	for _, rate := range []int{media.Rate16k, media.Rate24k, 44100} {
		var w recorder
		s := NewSender(&w)
		s.SetConnected(true)
		for range 25 {
			_ = s.WriteFrame(tone(rate))
		}
		if n := len(w.pkts); n < 24 || n > 25 {
			t.Fatalf("%d Hz: %d packets for 25 frames", rate, n)
		}
		if s.encRate != opusRate(rate) {
			t.Errorf("%d Hz: coded at %d Hz", rate, s.encRate)
		}
		dec, err := opus.NewDecoder(48000, 1)
		if err != nil {
			t.Fatal(err)
		}
		pcm := make([]int16, 5760)
		var level float64
		for i, p := range w.pkts {
			if opusSamples(p.Payload) != opusFrame {
				t.Fatalf("%d Hz: packet %d holds %d samples", rate, i, opusSamples(p.Payload))
			}
			n, err := dec.Decode(p.Payload, pcm)
			if err != nil {
				t.Fatal(err)
			}
			if i == 20 {
				level = vad.Level(pcm[:n])
			}
		}
		if level < -16.5 || level > -10.5 {
			t.Errorf("%d Hz: level %.1f dBFS; want the tone's (about -13.5)", rate, level)
		}
	}
}

// Audio that cannot go out is dropped and counted, never returned to the
// player as an error.
func TestSenderDropsWhatCannotGoOut(t *testing.T) {
	var w recorder
	s := NewSender(&w)
	for range 5 {
		if err := s.WriteFrame(tone(media.Rate16k)); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats(); st.Dropped != 5 || st.Sent != 0 || len(w.pkts) != 0 {
		t.Errorf("before connected: %+v, %d packets; want 5 dropped", st, len(w.pkts))
	}
	s.SetConnected(true)
	w.err = errors.New("congested")
	for range 5 {
		if err := s.WriteFrame(tone(media.Rate16k)); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats(); st.Dropped != 10 || st.Sent != 0 {
		t.Errorf("writer failing: %+v; want 10 dropped", st)
	}
	w.err = nil
	_ = s.WriteFrame(tone(media.Rate16k))
	if st := s.Stats(); st.Sent != 1 {
		t.Errorf("writer back: %+v; want 1 sent", st)
	}
}

func TestSenderOptionsSetTheHeader(t *testing.T) {
	var w recorder
	s := NewSender(&w, WithPayloadType(96), WithSSRC(0xfeed))
	s.SetConnected(true)
	_ = s.WriteFrame(tone(media.Rate16k))
	if len(w.pkts) != 1 || w.pkts[0].PayloadType != 96 || w.pkts[0].SSRC != 0xfeed {
		t.Fatalf("packets %+v; want one, payload type 96, SSRC 0xfeed", w.pkts)
	}
	if err := s.Check(); err != nil {
		t.Error(err)
	}
	c := senderConfig{complexity: 5, bitrate: 32000}
	WithOpus(0, 0)(&c)
	if c.complexity != 0 || c.bitrate != 32000 {
		t.Errorf("WithOpus(0, 0): complexity %d, bitrate %d; want 0 (cheapest) and the default", c.complexity, c.bitrate)
	}
	WithOpus(11, 24000)(&c)
	if c.complexity != 0 || c.bitrate != 24000 {
		t.Errorf("WithOpus(11, 24000): complexity %d, bitrate %d", c.complexity, c.bitrate)
	}
}

// The far end's reports of our stream (and only of ours) set the FEC the
// encoder adds: none before, some in most packets after.
func TestReportedLossTurnsOnFEC(t *testing.T) {
	var w recorder
	s := NewSender(&w)
	s.SetConnected(true)
	pcm := voice(100)
	send := func(from, to int) (fec int) {
		n := len(w.pkts)
		for i := from; i < to; i++ {
			_ = s.WriteFrame(media.Frame{SampleRate: media.Rate16k, Samples: pcm[i*320 : (i+1)*320]})
		}
		for _, p := range w.pkts[n:] {
			if HasFEC(p.Payload) {
				fec++
			}
		}
		return fec
	}
	if n := send(0, 40); n != 0 {
		t.Errorf("%d of 40 packets carry FEC with no loss reported", n)
	}
	const ssrc = 1234
	s.ObserveRTCP([]rtcp.Packet{
		&rtcp.ReceiverReport{Reports: []rtcp.ReceptionReport{{SSRC: ssrc + 1, FractionLost: 255}}},
	}, ssrc)
	if l := s.Stats().LossReported; l != 0 {
		t.Errorf("another stream's loss taken: %d%%", l)
	}
	s.ObserveRTCP([]rtcp.Packet{
		&rtcp.SenderReport{Reports: []rtcp.ReceptionReport{{SSRC: ssrc, FractionLost: 64}}},
	}, ssrc)
	if l := s.Stats().LossReported; l != 25 {
		t.Errorf("loss reported %d%%; want 25 (64/256)", l)
	}
	if n := send(40, 100); n < 40 {
		t.Errorf("%d of 60 packets carry FEC after a 25%% loss report", n)
	}
}

func TestLossPercent(t *testing.T) {
	for _, c := range []struct {
		fraction uint8
		want     int
	}{{0, 0}, {1, 1}, {13, 6}, {26, 11}, {128, 30}, {255, 30}} {
		if got := lossPercent(c.fraction); got != c.want {
			t.Errorf("lossPercent(%d) = %d; want %d", c.fraction, got, c.want)
		}
	}
}

func TestOpusRate(t *testing.T) {
	for in, want := range map[int]int{8000: 8000, 12000: 12000, 16000: 16000, 24000: 24000, 48000: 48000, 44100: 48000, 22050: 48000, 32000: 48000} {
		if got := opusRate(in); got != want {
			t.Errorf("opusRate(%d) = %d; want %d", in, got, want)
		}
	}
}

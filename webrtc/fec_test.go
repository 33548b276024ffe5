package webrtc_test

import (
	"context"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/hraban/opus"
	"github.com/pion/interceptor"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	pion "github.com/pion/webrtc/v4"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/media/opusrtp"
	"github.com/holdline/holdline/webrtc"
)

// A client that reports losing a quarter of the agent's packets gets
// in-band FEC in them from then on, and the caller's audio it sends comes
// out of the peer's jitter buffer as a frame every 20 ms.
func TestTheClientsReportedLossTurnsOnFEC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr, err := webrtc.NewTransport(webrtc.WithLogger(slog.New(slog.DiscardHandler)), webrtc.WithInterfaces("lo"))
	if err != nil {
		t.Fatal(err)
	}
	m := &pion.MediaEngine{}
	if err := m.RegisterDefaultCodecs(); err != nil {
		t.Fatal(err)
	}
	var se pion.SettingEngine
	se.SetIncludeLoopbackCandidate(true)
	se.SetNetworkTypes([]pion.NetworkType{pion.NetworkTypeUDP4})
	se.SetInterfaceFilter(func(name string) bool { return name == "lo" })
	api := pion.NewAPI(pion.WithMediaEngine(m), pion.WithInterceptorRegistry(&interceptor.Registry{}), pion.WithSettingEngine(se))
	pc, err := api.NewPeerConnection(pion.Configuration{})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	mic, err := pion.NewTrackLocalStaticRTP(pion.RTPCodecCapability{MimeType: pion.MimeTypeOpus, ClockRate: 48000, Channels: 2}, "audio", "caller")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pc.AddTrack(mic); err != nil {
		t.Fatal(err)
	}
	agent := make(chan *rtp.Packet, 1000)
	pc.OnTrack(func(track *pion.TrackRemote, _ *pion.RTPReceiver) {
		for {
			pkt, _, err := track.ReadRTP()
			if err != nil {
				return
			}
			select {
			case agent <- pkt:
			default:
			}
		}
	})
	offer, err := pc.CreateOffer(nil)
	if err != nil {
		t.Fatal(err)
	}
	gathered := pion.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(offer); err != nil {
		t.Fatal(err)
	}
	<-gathered
	up := make(chan struct{}, 1)
	frames := make(chan media.Frame, 1000)
	p, err := tr.Answer(ctx, pc.LocalDescription().SDP, webrtc.Handler{
		Connected: func(ok bool) {
			if ok {
				select {
				case up <- struct{}{}:
				default:
				}
			}
		},
		Audio: func(f media.Frame) {
			select {
			case frames <- f:
			default:
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := pc.SetRemoteDescription(pion.SessionDescription{Type: pion.SDPTypeAnswer, SDP: p.Answer()}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-up:
	case <-ctx.Done():
		t.Fatal("not connected")
	}

	enc, err := opus.NewEncoder(48000, 1, opus.AppVoIP)
	if err != nil {
		t.Fatal(err)
	}
	// The agent speaks a voiced sound; the caller the same, back.
	const rate = media.Rate24k
	voiced := func(i, n, rate int) []int16 {
		s := make([]int16, n)
		for k := range s {
			x := float64(i*n+k) / float64(rate)
			for h := 1.0; h <= 8; h++ {
				s[k] += int16(2500 / h * math.Sin(2*math.Pi*h*150*x) * (0.6 + 0.4*math.Sin(2*math.Pi*3*x)))
			}
		}
		return s
	}
	payload := make([]byte, 1500)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var ssrc uint32
	withFEC, before, reported := 0, 0, false
	start, ts := time.Now(), uint32(0)
	for i := 0; i < 150; i++ {
		<-tick.C
		if err := p.WriteFrame(media.Frame{SampleRate: rate, Samples: voiced(i, rate/50, rate)}); err != nil {
			t.Fatal(err)
		}
		n, err := enc.Encode(voiced(i, 960, 48000), payload)
		if err != nil {
			t.Fatal(err)
		}
		// Timestamps follow the wall clock, as a microphone's do: a stall
		// of this loop on a loaded machine is a pause, not lateness.
		ts = max(ts+960, uint32(time.Since(start)/(20*time.Millisecond))*960)
		if err := mic.WriteRTP(&rtp.Packet{Header: rtp.Header{Version: 2, SequenceNumber: uint16(i), Timestamp: ts, Marker: i == 0}, Payload: payload[:n]}); err != nil {
			t.Fatal(err)
		}
	drain:
		for {
			select {
			case pkt := <-agent:
				ssrc = pkt.SSRC
				switch fec := opusrtp.HasFEC(pkt.Payload); {
				case fec && reported:
					withFEC++
				case fec && i < 50:
					before++
				}
			default:
				break drain
			}
		}
		if i == 50 && ssrc != 0 {
			// 64/256 of the agent's packets lost, says the client.
			rr := &rtcp.ReceiverReport{Reports: []rtcp.ReceptionReport{{SSRC: ssrc, FractionLost: 64}}}
			if err := pc.WriteRTCP([]rtcp.Packet{rr}); err != nil {
				t.Fatal(err)
			}
		}
		if i > 50 && !reported && p.Stats().LossReported == 25 {
			reported = true
		}
	}
	st := p.Stats()
	t.Logf("stats %+v; %d agent packets with FEC after the report", st, withFEC)
	if !reported {
		t.Fatalf("the client's report of 25%% loss did not reach the encoder: %+v", st)
	}
	if before != 0 {
		t.Errorf("%d of the agent's packets carried FEC before any loss was reported", before)
	}
	if withFEC < 20 {
		t.Errorf("%d of the agent's packets carried FEC after the client reported loss", withFEC)
	}
	if st.PacketsIn < 100 || st.Lost != 0 || st.Late != 0 || st.JitterDelay <= 0 {
		t.Errorf("the caller's audio: %+v", st)
	}
	if n := len(frames); n < 100 {
		t.Errorf("%d frames of the caller's audio for 150 packets", n)
	}
}

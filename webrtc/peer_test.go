package webrtc_test

import (
	"context"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/hraban/opus"
	"github.com/pion/interceptor"
	"github.com/pion/rtp"
	pion "github.com/pion/webrtc/v4"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/webrtc"
)

// received is one agent packet as the client got it.
type received struct {
	pkt *rtp.Packet
	rms float64
}

// dialPeer connects a pion client to a Peer of tr and returns the peer and
// the packets the client receives from it.
func dialPeer(t *testing.T, ctx context.Context, tr *webrtc.Transport) (*webrtc.Peer, <-chan received) {
	t.Helper()
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
	t.Cleanup(func() { pc.Close() })
	if _, err := pc.AddTransceiverFromKind(pion.RTPCodecTypeAudio, pion.RTPTransceiverInit{Direction: pion.RTPTransceiverDirectionRecvonly}); err != nil {
		t.Fatal(err)
	}
	got := make(chan received, 1000)
	pc.OnTrack(func(track *pion.TrackRemote, _ *pion.RTPReceiver) {
		dec, err := opus.NewDecoder(48000, 1)
		if err != nil {
			t.Error(err)
			return
		}
		pcm := make([]int16, 5760)
		for {
			pkt, _, err := track.ReadRTP()
			if err != nil {
				return
			}
			n, err := dec.Decode(pkt.Payload, pcm)
			if err != nil {
				t.Errorf("decoding the agent's packet %d: %v", pkt.SequenceNumber, err)
				continue
			}
			select {
			case got <- received{pkt, rms(pcm[:n])}:
			default:
			}
		}
	})
	connected := make(chan struct{})
	pc.OnConnectionStateChange(func(s pion.PeerConnectionState) {
		if s == pion.PeerConnectionStateConnected {
			close(connected)
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
	peerConnected := make(chan struct{}, 1)
	p, err := tr.Answer(ctx, pc.LocalDescription().SDP, webrtc.Handler{Connected: func(up bool) {
		if up {
			select {
			case peerConnected <- struct{}{}:
			default:
			}
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if err := pc.SetRemoteDescription(pion.SessionDescription{Type: pion.SDPTypeAnswer, SDP: p.Answer()}); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []chan struct{}{connected, peerConnected} {
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatal("not connected")
		}
	}
	return p, got
}

// The agent's audio at 24 kHz goes out as Opus the client decodes at its
// level; after sound, ten packets of silence go out and then nothing, and
// the next sound starts a talkspurt: marker bit set, timestamp moved on by
// the time the sender was quiet, sequence numbers unbroken.
func TestSenderPausesInSilenceAndResumesWithATalkspurt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr, err := webrtc.NewTransport(webrtc.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	p, got := dialPeer(t, ctx, tr)

	const rate = media.Rate24k
	// 200 Hz: a whole number of periods per frame, so frames join smoothly.
	samples := make([]int16, rate/50)
	for i := range samples {
		samples[i] = int16(0.3 * 32767 * math.Sin(2*math.Pi*200*float64(i)/rate))
	}
	tone := media.Frame{SampleRate: rate, Samples: samples}
	quiet := media.Frame{SampleRate: rate, Samples: make([]int16, rate/50)}
	// Paced as a player would: 10 tone, 40 silence, 10 tone.
	script := make([]media.Frame, 0, 60)
	for range 10 {
		script = append(script, tone)
	}
	for range 40 {
		script = append(script, quiet)
	}
	for range 10 {
		script = append(script, tone)
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for _, f := range script {
		<-tick.C
		if err := p.WriteFrame(f); err != nil {
			t.Fatal(err)
		}
	}

	var pkts []received
	deadline := time.After(2 * time.Second)
collect:
	for len(pkts) < 30 {
		select {
		case r := <-got:
			pkts = append(pkts, r)
		case <-deadline:
			break collect
		}
	}
	if len(pkts) != 30 {
		t.Fatalf("the client got %d packets; want 30 (10 of sound, 10 of silence, 10 of sound)", len(pkts))
	}
	if st := p.Stats(); st.PausedOut != 30 || st.PacketsOut != 30 {
		t.Errorf("stats: %d sent, %d paused; want 30 and 30", st.PacketsOut, st.PausedOut)
	}
	for i, r := range pkts {
		if i > 0 && r.pkt.SequenceNumber != pkts[i-1].pkt.SequenceNumber+1 {
			t.Errorf("packet %d: sequence %d after %d", i, r.pkt.SequenceNumber, pkts[i-1].pkt.SequenceNumber)
		}
		wantMarker := i == 0 || i == 20
		if r.pkt.Marker != wantMarker {
			t.Errorf("packet %d: marker %v; want %v", i, r.pkt.Marker, wantMarker)
		}
		if i > 0 && i != 20 && r.pkt.Timestamp-pkts[i-1].pkt.Timestamp != 960 {
			t.Errorf("packet %d: timestamp +%d; want +960 (20 ms at 48 kHz)", i, r.pkt.Timestamp-pkts[i-1].pkt.Timestamp)
		}
	}
	// The pause was 30 packets of 20 ms; allow for the ticker's slack.
	if jump := pkts[20].pkt.Timestamp - pkts[19].pkt.Timestamp; jump < 25*960 || jump > 40*960 {
		t.Errorf("the talkspurt's timestamp moved %d ticks; want about %d (the 600 ms paused)", jump, 31*960)
	}
	// Opus needs a packet or two to reach the level; the middle of each
	// burst must be the tone, and the silent packets silence.
	for _, i := range []int{5, 9, 25, 29} {
		if pkts[i].rms < 0.1 {
			t.Errorf("packet %d: RMS %.3f; want the tone's (about 0.21)", i, pkts[i].rms)
		}
	}
	for i := 13; i < 20; i++ {
		if pkts[i].rms > 0.01 {
			t.Errorf("silent packet %d: RMS %.3f", i, pkts[i].rms)
		}
	}
}

func rms(s []int16) float64 {
	var sum float64
	for _, v := range s {
		f := float64(v) / 32768
		sum += f * f
	}
	return math.Sqrt(sum / float64(max(len(s), 1)))
}

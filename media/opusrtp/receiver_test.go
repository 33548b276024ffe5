package opusrtp

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hraban/opus"
	"github.com/pion/rtp"

	"github.com/holdline/holdline/media"
)

// voice is a voiced sound at 16 kHz, packet by packet: harmonics of a
// pitch that glides, with a syllable's envelope, so that Opus codes it in
// SILK and a lost packet is not trivially guessed.
func voice(packets int) []int16 {
	const rate = 16000
	out := make([]int16, packets*rate/50)
	phase := 0.0
	for i := range out {
		t := float64(i) / rate
		f0 := 140 + 40*math.Sin(2*math.Pi*0.7*t)
		phase += 2 * math.Pi * f0 / rate
		env := 0.5 + 0.5*math.Sin(2*math.Pi*3*t)
		var v float64
		for h := 1.0; h <= 12; h++ {
			v += math.Sin(h*phase) / h
		}
		out[i] = int16(6000 * env * v)
	}
	return out
}

// encode codes pcm (16 kHz) as 20 ms Opus packets, with in-band FEC for an
// expected loss of lossPerc (0: no FEC).
func encode(t *testing.T, pcm []int16, lossPerc int) [][]byte {
	t.Helper()
	enc, err := opus.NewEncoder(16000, 1, opus.AppVoIP)
	if err != nil {
		t.Fatal(err)
	}
	_ = enc.SetBitrate(32000)
	_ = enc.SetInBandFEC(lossPerc > 0)
	_ = enc.SetPacketLossPerc(lossPerc)
	var out [][]byte
	buf := make([]byte, 1500)
	for i := 0; i+320 <= len(pcm); i += 320 {
		n, err := enc.Encode(pcm[i:i+320], buf)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, slices.Clone(buf[:n]))
	}
	return out
}

// decodeAll decodes every packet, none lost: what the caller said as the
// session would hear it on a perfect network.
func decodeAll(t *testing.T, packets [][]byte) []int16 {
	t.Helper()
	dec, err := opus.NewDecoder(16000, 1)
	if err != nil {
		t.Fatal(err)
	}
	var out []int16
	pcm := make([]int16, 1920)
	for _, p := range packets {
		n, err := dec.Decode(p, pcm)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, pcm[:n]...)
	}
	return out
}

// arrival is a packet as the network delivers it.
type arrival struct {
	i  int           // packet index
	at time.Duration // from the start
}

// deliver sends the packets through an input on virtual time, each
// arriving when net says (ok false: lost), with a pause of pauseFor
// before packet pauseAt (0: none), and returns what the session got and
// the peer's figures.
func deliver(t *testing.T, packets [][]byte, net func(i int) (time.Duration, bool), pauseAt int, pauseFor time.Duration) ([]int16, ReceiverStats) {
	t.Helper()
	var got []int16
	var st ReceiverStats
	synctest.Test(t, func(t *testing.T) {
		in, err := NewReceiver(16000, func(f media.Frame) { got = append(got, f.Samples...) })
		if err != nil {
			t.Fatal(err)
		}
		var arrivals []arrival
		for i := range packets {
			sent := time.Duration(i) * 20 * time.Millisecond
			if pauseAt > 0 && i >= pauseAt {
				sent += pauseFor
			}
			if d, ok := net(i); ok {
				arrivals = append(arrivals, arrival{i, sent + d})
			}
		}
		slices.SortStableFunc(arrivals, func(a, b arrival) int { return int(a.at - b.at) })
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			in.Run(stop)
		}()
		start := time.Now()
		// Out of phase with the playout clock, as a network is.
		time.Sleep(7 * time.Millisecond)
		for _, a := range arrivals {
			time.Sleep(time.Until(start.Add(a.at)))
			ts := uint32(a.i * opusFrame)
			if pauseAt > 0 && a.i >= pauseAt {
				ts += uint32(pauseFor / time.Second * opusClock)
			}
			in.Push(&rtp.Packet{
				Header:  rtp.Header{SequenceNumber: uint16(60000 + a.i), Timestamp: 4_294_000_000 + ts, Marker: a.i == pauseAt},
				Payload: packets[a.i],
			}, time.Now())
		}
		time.Sleep(300 * time.Millisecond)
		close(stop)
		<-done
		st = in.Stats()
	})
	return got, st
}

// align returns b shifted to match a (by cross-correlation over lags up to
// maxLag samples) and cut to a's length.
func align(a, b []int16, maxLag int) []int16 {
	best, bestLag := math.Inf(-1), 0
	for lag := range maxLag {
		var c float64
		for i := 0; i < len(a) && i+lag < len(b); i += 2 {
			c += float64(a[i]) * float64(b[i+lag])
		}
		if c > best {
			best, bestLag = c, lag
		}
	}
	out := make([]int16, len(a))
	copy(out, b[min(bestLag, len(b)):])
	return out
}

// snr is 10 log10 of a's energy over the energy of b - a, in dB.
func snr(a, b []int16) float64 {
	var s, n float64
	for i := range a {
		d := float64(b[i]) - float64(a[i])
		s += float64(a[i]) * float64(a[i])
		n += d * d
	}
	if n == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(s/n)
}

func TestReorderedPacketsPlayInOrder(t *testing.T) {
	packets := encode(t, voice(150), 10)
	clean := decodeAll(t, packets)
	// One packet in ten held 20-60 ms, as a busy path reorders; the
	// buffer's first lateness teaches it the delay.
	rng := rand.New(rand.NewPCG(3, 4))
	got, st := deliver(t, packets, func(i int) (time.Duration, bool) {
		if rng.IntN(10) == 0 {
			return time.Duration(20+rng.IntN(41)) * time.Millisecond, true
		}
		return time.Millisecond, true
	}, 0, 0)
	t.Logf("stats %+v", st)
	if st.Late > 1 || st.Lost > 1 {
		t.Errorf("late %d, lost %d; want at most the first held packet", st.Late, st.Lost)
	}
	if s := snr(clean, align(clean, got, 16000/5)); st.Late == 0 && !math.IsInf(s, 1) && s < 60 {
		t.Errorf("SNR %.1f dB against the clean decode; want it exact", s)
	}
	if st.JitterDelay < 40*time.Millisecond || st.JitterDelay > st.MaxJitterDelay {
		t.Errorf("jitter delay %v (max %v)", st.JitterDelay, st.MaxJitterDelay)
	}
}

func TestASingleLossIsRebuiltFromFEC(t *testing.T) {
	pcm := voice(150)
	withFEC := encode(t, pcm, 20)
	// Five losses, each of a packet whose successor carries FEC (libopus
	// leaves it out where it judges the audio easy to conceal).
	drop := map[int]bool{}
	for i := 15; len(drop) < 5; i++ {
		if i%30 >= 15 && hasLBRR(withFEC[i+1]) {
			drop[i] = true
			i += 30 - i%30 + 14
		}
	}
	lost := func(i int) (time.Duration, bool) { return time.Millisecond, !drop[i] }
	got, st := deliver(t, withFEC, lost, 0, 0)
	if st.Lost != 5 || st.FECRecovered != 5 {
		t.Errorf("lost %d, recovered by FEC %d; want 5 and 5", st.Lost, st.FECRecovered)
	}
	fecSNR := snr(decodeAll(t, withFEC), align(decodeAll(t, withFEC), got, 16000/5))

	noFEC := encode(t, pcm, 0)
	got, st = deliver(t, noFEC, lost, 0, 0)
	if st.Lost != 5 || st.FECRecovered != 0 {
		t.Errorf("without FEC: lost %d, recovered %d; want 5 and 0", st.Lost, st.FECRecovered)
	}
	plcSNR := snr(decodeAll(t, noFEC), align(decodeAll(t, noFEC), got, 16000/5))
	t.Logf("5 packets lost in 150: SNR against the clean decode %.1f dB with FEC, %.1f dB concealed", fecSNR, plcSNR)
	if fecSNR < plcSNR+3 {
		t.Errorf("FEC gave %.1f dB, concealment %.1f dB: FEC should do better", fecSNR, plcSNR)
	}
}

func TestABurstIsConcealedAndBounded(t *testing.T) {
	packets := encode(t, voice(100), 20)
	got, st := deliver(t, packets, func(i int) (time.Duration, bool) {
		return time.Millisecond, i < 40 || i >= 55
	}, 0, 0)
	if st.Lost != 15 || st.FECRecovered != 1 {
		t.Errorf("lost %d, recovered %d; want 15, the last from FEC", st.Lost, st.FECRecovered)
	}
	// 100 ms concealed after the burst starts, and 100 ms after the
	// stream ends.
	if st.Concealed > 10 {
		t.Errorf("%d frames concealed", st.Concealed)
	}
	// The session still got a frame every 20 ms.
	if n := len(got) / 320; n < 100 {
		t.Errorf("%d frames for 100 packets' time", n)
	}
}

func TestAPauseIsNeitherLostNorConcealedLong(t *testing.T) {
	packets := encode(t, voice(100), 20)
	got, st := deliver(t, packets, func(int) (time.Duration, bool) { return time.Millisecond, true }, 50, 2*time.Second)
	if st.Lost != 0 || st.Late != 0 {
		t.Errorf("lost %d, late %d over a pause", st.Lost, st.Late)
	}
	if st.Concealed > 10 {
		t.Errorf("%d frames concealed over a 2 s pause", st.Concealed)
	}
	// A frame every 20 ms through the pause: 100 packets and 2 s.
	if n := len(got) / 320; n < 200 || n > 230 {
		t.Errorf("%d frames for 4 s", n)
	}
}

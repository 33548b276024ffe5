package localaudio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/gen2brain/malgo"

	"github.com/holdline/holdline/media"
)

// errSpeakerStopped is WriteFrame's error once the backend stopped the
// speaker by itself (a headset unplugged, the sound server gone).
var errSpeakerStopped = errors.New("localaudio: the speaker stopped")

// speakerContext is a malgo context that has a speaker to open.
type speakerContext struct {
	ctx  *malgo.AllocatedContext
	name string // of the device the backend will open
}

// newSpeakerContext initialises the playback backend and checks that it
// has a speaker. Its error wraps ErrNoSpeaker when it has none.
func newSpeakerContext(c config) (*speakerContext, error) {
	log := c.log
	ctx, err := malgo.InitContext(miniaudioBackends(c.backends), malgo.ContextConfig{}, func(msg string) {
		msg = strings.TrimSpace(msg)
		// Which backends were tried, and why they failed, says why there is
		// no speaker; the symbols of each library loaded say nothing.
		if !strings.HasPrefix(msg, "Loading symbol") && !strings.HasSuffix(msg, "backend is disabled.") {
			log.Debug("localaudio: miniaudio: " + msg)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("%w found: no audio backend could start (%v)", ErrNoSpeaker, err)
	}
	sc := &speakerContext{ctx: ctx}
	devices, err := ctx.Devices(malgo.Playback)
	if err != nil {
		sc.free()
		return nil, fmt.Errorf("localaudio: listing speakers: %w", err)
	}
	allowNull := wantsNull(c.backends)
	found := false
	for _, dev := range devices {
		if !allowNull && isNullDevice(dev.ID[:], dev.Name()) {
			log.Debug("localaudio: not a speaker: a backend's stand-in", "name", dev.Name())
			continue
		}
		// The backend opens its default device; name it if it says which.
		if !found || dev.IsDefault != 0 {
			sc.name = dev.Name()
		}
		found = true
	}
	if !found {
		sc.free()
		return nil, fmt.Errorf("%w found (%s)", ErrNoSpeaker, noDeviceHint)
	}
	return sc, nil
}

func (sc *speakerContext) free() {
	_ = sc.ctx.Uninit()
	sc.ctx.Free()
}

// speaker is the playback side of a Device.
type speaker struct {
	backend *speakerContext
	dev     *malgo.Device
	name    string
	out     *playout
	// stopped: the backend stopped the device by itself.
	stopped atomic.Bool
}

// startSpeaker opens the backend's default playback device, mono 16-bit at
// c.rate (the backend converts to what the device plays), and starts it.
// Once it succeeds, the speaker owns backend.
func startSpeaker(backend *speakerContext, c config, closing <-chan struct{}) (*speaker, error) {
	s := &speaker{
		backend: backend,
		name:    backend.name,
		out: newPlayout(
			media.SamplesFor(c.rate, playoutDuration),
			media.SamplesFor(c.rate, primeDuration),
			media.SamplesFor(c.rate, FrameDuration)),
	}
	cfg := malgo.DefaultDeviceConfig(malgo.Playback)
	cfg.Playback.Format = malgo.FormatS16
	cfg.Playback.Channels = 1
	cfg.SampleRate = uint32(c.rate)
	cfg.PeriodSizeInMilliseconds = uint32(speakerPeriod.Milliseconds())
	cfg.PerformanceProfile = malgo.LowLatency
	cfg.Pulse.StreamNamePlayback = "Holdline"

	// The callback runs on the backend's audio thread; scratch is its own.
	var scratch []int16
	onPlay := c.onPlay
	log := c.log
	callbacks := malgo.DeviceCallbacks{
		Data: func(out, _ []byte, frames uint32) {
			n := int(frames)
			if cap(scratch) < n {
				scratch = make([]int16, n)
			}
			buf := scratch[:n]
			k := s.out.read(buf)
			for i, v := range buf {
				binary.NativeEndian.PutUint16(out[2*i:], uint16(v))
			}
			if onPlay != nil {
				onPlay(buf[:k])
			}
		},
		Stop: func() {
			select {
			case <-closing:
			default:
				log.Warn("localaudio: the speaker stopped", "speaker", s.name)
				s.stopped.Store(true)
			}
		},
	}
	dev, err := malgo.InitDevice(backend.ctx.Context, cfg, callbacks)
	if err != nil {
		return nil, fmt.Errorf("localaudio: opening the speaker %q: %w", s.name, err)
	}
	if err := dev.Start(); err != nil {
		dev.Uninit()
		return nil, fmt.Errorf("localaudio: starting the speaker %q: %w", s.name, err)
	}
	s.dev = dev
	return s, nil
}

// close stops the device, which waits for its callback to return, and
// releases the backend.
func (s *speaker) close() error {
	s.dev.Uninit()
	err := s.backend.ctx.Uninit()
	s.backend.ctx.Free()
	if err != nil {
		return fmt.Errorf("localaudio: closing the speaker: %w", err)
	}
	return nil
}

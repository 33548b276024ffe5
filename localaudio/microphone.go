package localaudio

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pion/mediadevices"
	"github.com/pion/mediadevices/pkg/driver"
	_ "github.com/pion/mediadevices/pkg/driver/microphone" // the malgo capture devices
	"github.com/pion/mediadevices/pkg/io/audio"
	"github.com/pion/mediadevices/pkg/prop"
	"github.com/pion/mediadevices/pkg/wave"

	"github.com/holdline/holdline/media"
)

// findMicrophone returns the registered microphone called name (label, name
// or driver ID), or the one the system prefers when name is empty. Its
// error wraps ErrNoMicrophone when there is none.
func findMicrophone(name string, log *slog.Logger) (driver.Driver, error) {
	all := driver.GetManager().Query(driver.FilterAnd(
		driver.FilterAudioRecorder(),
		driver.FilterDeviceType(driver.Microphone)))
	var found []driver.Driver
	for _, d := range all {
		info := d.Info()
		if name != "" && (name == d.ID() || name == info.Label || name == info.Name) {
			return d, nil
		}
		if isNullMicrophone(info) {
			log.Debug("localaudio: not a microphone: a backend's stand-in", "name", info.Name)
			continue
		}
		found = append(found, d)
	}
	// The system's default first (the driver gives it a higher priority),
	// then by name, so that the choice does not depend on map order.
	slices.SortFunc(found, func(a, b driver.Driver) int {
		if c := cmp.Compare(b.Info().Priority, a.Info().Priority); c != 0 {
			return c
		}
		return strings.Compare(microphoneName(a), microphoneName(b))
	})
	if name != "" {
		names := make([]string, len(found))
		for i, d := range found {
			names[i] = fmt.Sprintf("%q", microphoneName(d))
		}
		have := "none"
		if len(names) > 0 {
			have = strings.Join(names, ", ")
		}
		return nil, fmt.Errorf("%w named %q (have: %s)", ErrNoMicrophone, name, have)
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("%w found (%s)", ErrNoMicrophone, noDeviceHint)
	}
	return found[0], nil
}

// isNullMicrophone says whether a microphone the malgo driver registered
// is a backend's stand-in for none. That driver labels a device with its
// malgo ID in hex.
func isNullMicrophone(info driver.Info) bool {
	id, err := hex.DecodeString(info.Label)
	if err != nil {
		id = nil
	}
	return isNullDevice(id, info.Name)
}

func microphoneName(d driver.Driver) string {
	if info := d.Info(); info.Name != "" {
		return info.Name
	}
	return d.Info().Label
}

// chunk is one read of the microphone, mono, at its rate.
type chunk struct {
	samples []int16
	rate    int
}

// microphone is the capture side of a Device. Its goroutine reads the
// track from Open until Close, so that the backend's thread, which waits
// for each read, is never held up by Pump or its absence.
type microphone struct {
	name   string
	track  mediadevices.Track
	reader audio.Reader
	log    *slog.Logger

	chunks chan chunk
	free   chan []int16
	// stop asks the reading goroutine to end; done closes when it has,
	// after setting err.
	stop    chan struct{}
	done    chan struct{}
	err     error
	pumping atomic.Bool

	captured, lost atomic.Int64
}

// startMicrophone opens d through mediadevices and starts reading it.
func startMicrophone(d driver.Driver, log *slog.Logger) (*microphone, error) {
	name := microphoneName(d)
	stream, err := mediadevices.GetUserMedia(mediadevices.MediaStreamConstraints{
		Audio: func(c *mediadevices.MediaTrackConstraints) {
			c.DeviceID = prop.StringExact(d.ID())
			c.ChannelCount = prop.Int(1) // preferred; stereo is mixed down
		},
	})
	if err != nil {
		return nil, fmt.Errorf("localaudio: opening the microphone %q: %w", name, err)
	}
	var track *mediadevices.AudioTrack
	if tracks := stream.GetAudioTracks(); len(tracks) == 1 {
		track, _ = tracks[0].(*mediadevices.AudioTrack)
	}
	if track == nil {
		for _, t := range stream.GetTracks() {
			t.Close()
		}
		return nil, fmt.Errorf("localaudio: opening the microphone %q: no audio track", name)
	}
	m := &microphone{
		name:   name,
		track:  track,
		reader: track.NewReader(false),
		log:    log,
		chunks: make(chan chunk, captureQueue),
		free:   make(chan []int16, captureQueue+2),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	go m.read()
	return m, nil
}

// read moves the microphone's chunks to m.chunks, dropping those Pump does
// not take in time, until stop or a read error.
func (m *microphone) read() {
	defer close(m.done)
	for {
		select {
		case <-m.stop:
			return
		default:
		}
		a, release, err := m.reader.Read()
		if err != nil {
			m.err = err
			return
		}
		info := a.ChunkInfo()
		if info.SamplingRate <= 0 {
			release()
			m.err = fmt.Errorf("audio chunk without a sampling rate (%T)", a)
			return
		}
		var buf []int16
		select {
		case buf = <-m.free:
		default:
		}
		buf = appendMono(buf[:0], a)
		release()
		m.captured.Add(int64(len(buf)))
		select {
		case m.chunks <- chunk{samples: buf, rate: info.SamplingRate}:
		default:
			m.lost.Add(int64(len(buf)))
			m.recycle(buf)
		}
	}
}

func (m *microphone) recycle(buf []int16) {
	select {
	case m.free <- buf:
	default:
	}
}

func (m *microphone) pump(ctx context.Context, closing <-chan struct{}, rate int, push func(context.Context, media.Frame) error) error {
	if !m.pumping.CompareAndSwap(false, true) {
		return errors.New("localaudio: Pump: already running")
	}
	defer m.pumping.Store(false)
	framer, err := media.NewFramer(rate, FrameDuration)
	if err != nil {
		return fmt.Errorf("localaudio: Pump: %w", err)
	}
	// What was captured before this Pump is stale.
	for drained := false; !drained; {
		select {
		case c := <-m.chunks:
			m.lost.Add(int64(len(c.samples)))
			m.recycle(c.samples)
		default:
			drained = true
		}
	}
	emit := func(f media.Frame) error { return push(ctx, f) }
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-closing:
			return ErrClosed
		case <-m.done:
			select {
			case <-closing:
				return ErrClosed
			default:
			}
			return fmt.Errorf("localaudio: the microphone %q stopped: %w", m.name, m.err)
		case c := <-m.chunks:
			err := framer.Write(c.samples, c.rate, emit)
			m.recycle(c.samples)
			if err != nil {
				return err
			}
		}
	}
}

// close stops the reading goroutine and closes the track.
//
// The order matters with mediadevices' malgo microphone driver: closing it
// sets its chunk channel to nil, so a read that starts after the close
// would block forever. So the goroutine is asked to stop first and, on a
// live microphone, does so after its current read (at most one 20 ms
// period). A microphone that stopped delivering never ends that read by
// itself; after captureStopGrace the track is closed under it, which ends
// the read with io.EOF.
func (m *microphone) close() error {
	close(m.stop)
	grace := time.NewTimer(captureStopGrace)
	select {
	case <-m.done:
	case <-grace.C:
		m.log.Debug("localaudio: microphone read still blocked; closing it under the read", "microphone", m.name)
	}
	grace.Stop()
	err := m.track.Close()
	<-m.done
	if err != nil {
		return fmt.Errorf("localaudio: closing the microphone: %w", err)
	}
	return nil
}

// appendMono appends a's samples, mixed down to one channel, to dst as
// 16-bit PCM.
func appendMono(dst []int16, a wave.Audio) []int16 {
	info := a.ChunkInfo()
	ch := max(info.Channels, 1)
	switch a := a.(type) {
	case *wave.Int16Interleaved:
		for i := range info.Len {
			var sum int32
			for _, v := range a.Data[i*ch : i*ch+ch] {
				sum += int32(v)
			}
			dst = append(dst, int16(sum/int32(ch)))
		}
	case *wave.Float32Interleaved:
		for i := range info.Len {
			var sum float32
			for _, v := range a.Data[i*ch : i*ch+ch] {
				sum += v
			}
			dst = append(dst, floatToPCM(sum/float32(ch)))
		}
	default:
		for i := range info.Len {
			var sum int32
			for c := range ch {
				sum += int32(wave.Int16SampleFormat.Convert(a.At(i, c)).(wave.Int16Sample))
			}
			dst = append(dst, int16(sum/int32(ch)))
		}
	}
	return dst
}

func floatToPCM(v float32) int16 {
	return int16(math.Round(float64(max(-1, min(1, v)) * math.MaxInt16)))
}

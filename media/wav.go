package media

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Sentinel errors from ReadWAV. The returned errors wrap them with detail, so
// test with errors.Is.
var (
	// ErrNotWAV means the input is not a RIFF/WAVE stream, or is a damaged or
	// truncated one.
	ErrNotWAV = errors.New("media: not a valid WAV stream")
	// ErrUnsupportedWAV means the input is a well-formed WAV stream in an
	// encoding this package does not decode (anything but 16-bit integer PCM).
	ErrUnsupportedWAV = errors.New("media: unsupported WAV encoding")
)

const (
	wavFormatPCM        = 0x0001
	wavFormatExtensible = 0xFFFE

	wavHeaderLen = 44
	// maxWAVData is the largest data chunk a 32-bit RIFF size field can
	// describe once the 36 bytes of header that follow it are counted.
	maxWAVData = math.MaxUint32 - (wavHeaderLen - 8)

	// espeakStreamSize is the data size espeak-ng writes with --stdout: it
	// cannot seek back on a pipe, so the placeholder is never patched.
	espeakStreamSize = 0x7ffff000
)

// wavPCMGUID is the tail of KSDATAFORMAT_SUBTYPE_PCM; its first two bytes
// carry the format tag, the rest is fixed for every "classic" subformat.
var wavPCMGUID = [14]byte{0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71}

// ReadWAV decodes a RIFF/WAVE stream of 16-bit PCM, returning mono samples
// and the stream's sample rate (any positive rate; resample as needed).
// Multichannel audio is downmixed by averaging the channels.
//
// Chunks other than "fmt " and "data" are skipped. A data chunk size of 0,
// 0xFFFFFFFF or 0x7FFFF000 is taken to mean "until EOF": writers streaming to
// a pipe (espeak-ng --stdout among them) cannot patch the size afterwards. A
// trailing partial sample frame, as left by a writer killed mid-write, is
// dropped.
//
// Errors wrap ErrNotWAV (malformed or truncated input, the latter also
// wrapping io.ErrUnexpectedEOF) or ErrUnsupportedWAV (valid WAV, other
// encoding); failures of r itself are returned wrapped as they are.
func ReadWAV(r io.Reader) (samples []int16, sampleRate int, err error) {
	var hdr [12]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, 0, wavReadErr("RIFF header", err)
	}
	switch string(hdr[0:4]) {
	case "RIFF":
	case "RF64", "BW64":
		return nil, 0, fmt.Errorf("%w: %s (64-bit RIFF) container", ErrUnsupportedWAV, hdr[0:4])
	default:
		return nil, 0, fmt.Errorf("%w: starts with %q, want \"RIFF\"", ErrNotWAV, hdr[0:4])
	}
	if string(hdr[8:12]) != "WAVE" {
		return nil, 0, fmt.Errorf("%w: RIFF form type %q, want \"WAVE\"", ErrNotWAV, hdr[8:12])
	}

	channels := 0
	for {
		var ch [8]byte
		if _, err := io.ReadFull(r, ch[:]); err != nil {
			if err == io.EOF {
				if channels == 0 {
					return nil, 0, fmt.Errorf("%w: no fmt chunk", ErrNotWAV)
				}
				return nil, 0, fmt.Errorf("%w: no data chunk", ErrNotWAV)
			}
			return nil, 0, wavReadErr("chunk header", err)
		}
		id, size := string(ch[0:4]), binary.LittleEndian.Uint32(ch[4:8])

		switch id {
		case "fmt ":
			channels, sampleRate, err = readWAVFormat(r, size)
			if err != nil {
				return nil, 0, err
			}
		case "data":
			if channels == 0 {
				return nil, 0, fmt.Errorf("%w: data chunk before fmt chunk", ErrNotWAV)
			}
			samples, err = readWAVData(r, size, channels)
			if err != nil {
				return nil, 0, err
			}
			// Whatever follows the samples (LIST, id3, ...) is of no use here.
			return samples, sampleRate, nil
		default:
			if _, err := io.CopyN(io.Discard, r, int64(size)); err != nil {
				return nil, 0, wavReadErr(fmt.Sprintf("%q chunk", id), err)
			}
			if err := skipWAVPad(r, size); err != nil {
				return nil, 0, err
			}
		}
	}
}

// readWAVFormat parses a "fmt " chunk body of the given size.
func readWAVFormat(r io.Reader, size uint32) (channels, rate int, err error) {
	// WAVEFORMATEXTENSIBLE is 40 bytes; anything much longer is corrupt
	// rather than a format this package could use.
	if size < 16 || size > 1024 {
		return 0, 0, fmt.Errorf("%w: fmt chunk of %d bytes", ErrNotWAV, size)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return 0, 0, wavReadErr("fmt chunk", err)
	}
	if err := skipWAVPad(r, size); err != nil {
		return 0, 0, err
	}

	le := binary.LittleEndian
	format := le.Uint16(b[0:2])
	channels = int(le.Uint16(b[2:4]))
	srate := le.Uint32(b[4:8])
	bits := le.Uint16(b[14:16])

	if format == wavFormatExtensible {
		if size < 40 {
			return 0, 0, fmt.Errorf("%w: WAVE_FORMAT_EXTENSIBLE fmt chunk of %d bytes, want 40", ErrNotWAV, size)
		}
		sub := b[24:40]
		if [14]byte(sub[2:]) != wavPCMGUID {
			return 0, 0, fmt.Errorf("%w: WAVE_FORMAT_EXTENSIBLE subformat %x", ErrUnsupportedWAV, sub)
		}
		format = le.Uint16(sub[0:2])
	}
	if format != wavFormatPCM {
		return 0, 0, fmt.Errorf("%w: format tag %#04x (%s), want PCM", ErrUnsupportedWAV, format, wavFormatName(format))
	}
	if bits != 16 {
		return 0, 0, fmt.Errorf("%w: %d bits per sample, want 16", ErrUnsupportedWAV, bits)
	}
	if channels == 0 {
		return 0, 0, fmt.Errorf("%w: zero channels", ErrNotWAV)
	}
	if srate == 0 || srate > math.MaxInt32 {
		return 0, 0, fmt.Errorf("%w: sample rate %d", ErrNotWAV, srate)
	}
	return channels, int(srate), nil
}

// readWAVData reads a data chunk body and downmixes it to mono.
func readWAVData(r io.Reader, size uint32, channels int) ([]int16, error) {
	var (
		data []byte
		err  error
	)
	switch size {
	case 0, math.MaxUint32, espeakStreamSize:
		data, err = io.ReadAll(r)
	default:
		// Not make([]byte, size): a corrupt size must not cost 4 GiB.
		data, err = io.ReadAll(io.LimitReader(r, int64(size)))
		if err == nil && len(data) < int(size) {
			return nil, fmt.Errorf("%w: truncated data chunk, %d of %d bytes: %w",
				ErrNotWAV, len(data), size, io.ErrUnexpectedEOF)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("media: reading WAV data: %w", err)
	}

	frameBytes := 2 * channels
	n := len(data) / frameBytes
	samples := make([]int16, n)
	if channels == 1 {
		for i := range samples {
			samples[i] = int16(binary.LittleEndian.Uint16(data[2*i:]))
		}
		return samples, nil
	}
	for i := range samples {
		frame := data[i*frameBytes : (i+1)*frameBytes]
		sum := 0
		for c := 0; c < channels; c++ {
			sum += int(int16(binary.LittleEndian.Uint16(frame[2*c:])))
		}
		// The mean of int16 values always fits in an int16.
		samples[i] = int16(sum / channels)
	}
	return samples, nil
}

// skipWAVPad consumes the pad byte RIFF puts after an odd-sized chunk. A
// missing pad at EOF is tolerated: some writers omit it on the last chunk.
func skipWAVPad(r io.Reader, size uint32) error {
	if size&1 == 0 {
		return nil
	}
	var pad [1]byte
	if _, err := io.ReadFull(r, pad[:]); err != nil && err != io.EOF {
		return wavReadErr("chunk padding", err)
	}
	return nil
}

// wavReadErr tells a truncated stream (ErrNotWAV) apart from a failing
// reader, whose error is passed on.
func wavReadErr(what string, err error) error {
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: truncated %s: %w", ErrNotWAV, what, io.ErrUnexpectedEOF)
	}
	return fmt.Errorf("media: reading WAV %s: %w", what, err)
}

func wavFormatName(tag uint16) string {
	switch tag {
	case 0x0002:
		return "MS ADPCM"
	case 0x0003:
		return "IEEE float"
	case 0x0006:
		return "A-law"
	case 0x0007:
		return "µ-law"
	case 0x0011:
		return "IMA ADPCM"
	case 0x0055:
		return "MP3"
	}
	return "unknown"
}

// WriteWAV writes samples as a mono 16-bit PCM WAV stream at sampleRate.
func WriteWAV(w io.Writer, samples []int16, sampleRate int) error {
	if sampleRate <= 0 || sampleRate > math.MaxInt32/2 {
		return fmt.Errorf("media: WriteWAV: invalid sample rate %d", sampleRate)
	}
	if uint64(len(samples))*2 > maxWAVData {
		return fmt.Errorf("media: WriteWAV: %d samples exceed the 4 GiB WAV limit", len(samples))
	}
	dataLen := uint32(2 * len(samples))
	hdr := wavHeader(sampleRate, dataLen)
	if _, err := w.Write(hdr[:]); err != nil {
		return fmt.Errorf("media: WriteWAV: %w", err)
	}
	// Encode in bounded chunks so a long recording is not duplicated in
	// memory just to change its byte order.
	var buf [4096]byte
	for len(samples) > 0 {
		n := min(len(samples), len(buf)/2)
		putSamples(buf[:2*n], samples[:n])
		if _, err := w.Write(buf[:2*n]); err != nil {
			return fmt.Errorf("media: WriteWAV: %w", err)
		}
		samples = samples[n:]
	}
	return nil
}

// wavHeader returns the canonical 44-byte header for mono PCM16.
func wavHeader(sampleRate int, dataLen uint32) [wavHeaderLen]byte {
	var h [wavHeaderLen]byte
	le := binary.LittleEndian
	copy(h[0:4], "RIFF")
	le.PutUint32(h[4:8], dataLen+wavHeaderLen-8)
	copy(h[8:12], "WAVE")
	copy(h[12:16], "fmt ")
	le.PutUint32(h[16:20], 16)
	le.PutUint16(h[20:22], wavFormatPCM)
	le.PutUint16(h[22:24], 1) // channels
	le.PutUint32(h[24:28], uint32(sampleRate))
	le.PutUint32(h[28:32], uint32(2*sampleRate)) // byte rate
	le.PutUint16(h[32:34], 2)                    // block align
	le.PutUint16(h[34:36], 16)                   // bits per sample
	copy(h[36:40], "data")
	le.PutUint32(h[40:44], dataLen)
	return h
}

func putSamples(dst []byte, src []int16) {
	for i, s := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], uint16(s))
	}
}

// WAVWriter streams mono PCM16 frames to a WAV file, for recordings whose
// length is not known up front. Until Close patches the header, the sizes in
// it are zero, which ReadWAV (and most players) read as "until EOF", so a
// recording cut short by a crash is still usable.
//
// A WAVWriter is not safe for concurrent use.
type WAVWriter struct {
	w     io.WriteSeeker
	start int64 // offset of the header, so a WAV can be embedded in a larger file
	rate  int
	n     uint64 // data bytes written
	buf   []byte
	err   error // sticky: after a failed write the file is inconsistent
}

// errWAVWriterClosed is returned by WriteFrame after Close.
var errWAVWriterClosed = errors.New("media: WAVWriter is closed")

// NewWAVWriter writes a WAV header for mono PCM16 at sampleRate at the
// current position of w and returns a writer for the samples.
func NewWAVWriter(w io.WriteSeeker, sampleRate int) (*WAVWriter, error) {
	if sampleRate <= 0 || sampleRate > math.MaxInt32/2 {
		return nil, fmt.Errorf("media: NewWAVWriter: invalid sample rate %d", sampleRate)
	}
	start, err := w.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, fmt.Errorf("media: NewWAVWriter: %w", err)
	}
	hdr := wavHeader(sampleRate, 0)
	// Zero RIFF size too: the placeholder must not look like a finished file.
	binary.LittleEndian.PutUint32(hdr[4:8], 0)
	if _, err := w.Write(hdr[:]); err != nil {
		return nil, fmt.Errorf("media: NewWAVWriter: %w", err)
	}
	return &WAVWriter{w: w, start: start, rate: sampleRate}, nil
}

// WriteFrame appends f's samples. f.SampleRate must match the writer's rate:
// a recording silently mixing rates would play back at the wrong speed.
func (ww *WAVWriter) WriteFrame(f Frame) error {
	if ww.err != nil {
		return ww.err
	}
	if f.SampleRate != ww.rate {
		return fmt.Errorf("media: WAVWriter: frame at %d Hz, writer at %d Hz", f.SampleRate, ww.rate)
	}
	n := 2 * uint64(len(f.Samples))
	if ww.n+n > maxWAVData {
		return fmt.Errorf("media: WAVWriter: recording would exceed the 4 GiB WAV limit")
	}
	if cap(ww.buf) < int(n) {
		ww.buf = make([]byte, n)
	}
	b := ww.buf[:n]
	putSamples(b, f.Samples)
	if _, err := ww.w.Write(b); err != nil {
		ww.err = fmt.Errorf("media: WAVWriter: %w", err)
		return ww.err
	}
	ww.n += n
	return nil
}

// Close patches the header with the final sizes and leaves w positioned at
// the end of the data. It does not close w. Closing twice is a no-op.
func (ww *WAVWriter) Close() error {
	if ww.err == errWAVWriterClosed {
		return nil
	}
	if ww.err != nil {
		return ww.err
	}
	ww.err = errWAVWriterClosed

	var b [4]byte
	patch := func(off int64, v uint32) error {
		if _, err := ww.w.Seek(ww.start+off, io.SeekStart); err != nil {
			return err
		}
		binary.LittleEndian.PutUint32(b[:], v)
		_, err := ww.w.Write(b[:])
		return err
	}
	data := uint32(ww.n)
	if err := patch(4, data+wavHeaderLen-8); err != nil {
		return fmt.Errorf("media: WAVWriter: patching header: %w", err)
	}
	if err := patch(40, data); err != nil {
		return fmt.Errorf("media: WAVWriter: patching header: %w", err)
	}
	if _, err := ww.w.Seek(ww.start+wavHeaderLen+int64(ww.n), io.SeekStart); err != nil {
		return fmt.Errorf("media: WAVWriter: %w", err)
	}
	return nil
}

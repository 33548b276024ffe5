package media

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"slices"
	"testing"
)

// chunk encodes a RIFF chunk, with the pad byte an odd size needs.
func chunk(id string, body []byte) []byte {
	b := append([]byte(id), 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(b[4:], uint32(len(body)))
	b = append(b, body...)
	if len(body)%2 == 1 {
		b = append(b, 0)
	}
	return b
}

// riff wraps chunks into a RIFF/WAVE stream.
func riff(chunks ...[]byte) []byte {
	body := []byte("WAVE")
	for _, c := range chunks {
		body = append(body, c...)
	}
	return chunk("RIFF", body)
}

func fmtBody(format, channels uint16, rate uint32, bits uint16) []byte {
	b := make([]byte, 16)
	le := binary.LittleEndian
	le.PutUint16(b[0:], format)
	le.PutUint16(b[2:], channels)
	le.PutUint32(b[4:], rate)
	le.PutUint32(b[8:], rate*uint32(channels)*uint32(bits)/8)
	le.PutUint16(b[12:], channels*bits/8)
	le.PutUint16(b[14:], bits)
	return b
}

// extensibleBody is a WAVE_FORMAT_EXTENSIBLE fmt body with the given
// subformat tag (1 = PCM, 3 = float).
func extensibleBody(channels uint16, rate uint32, bits, subformat uint16) []byte {
	b := fmtBody(wavFormatExtensible, channels, rate, bits)
	b = binary.LittleEndian.AppendUint16(b, 22) // cbSize
	b = binary.LittleEndian.AppendUint16(b, bits)
	b = binary.LittleEndian.AppendUint32(b, 0x3) // front left, front right
	b = binary.LittleEndian.AppendUint16(b, subformat)
	return append(b, wavPCMGUID[:]...)
}

func pcmBytes(s ...int16) []byte {
	b := make([]byte, 2*len(s))
	putSamples(b, s)
	return b
}

// seekBuffer is an in-memory io.WriteSeeker.
type seekBuffer struct {
	b   []byte
	pos int
}

func (s *seekBuffer) Write(p []byte) (int, error) {
	if need := s.pos + len(p); need > len(s.b) {
		s.b = append(s.b, make([]byte, need-len(s.b))...)
	}
	copy(s.b[s.pos:], p)
	s.pos += len(p)
	return len(p), nil
}

func (s *seekBuffer) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		off += int64(s.pos)
	case io.SeekEnd:
		off += int64(len(s.b))
	}
	if off < 0 {
		return 0, errors.New("negative position")
	}
	s.pos = int(off)
	return off, nil
}

func TestWAVRoundTrip(t *testing.T) {
	samples := []int16{0, 1, -1, math.MaxInt16, math.MinInt16, 12345, -23456}
	for _, rate := range []int{Rate8k, 22050, Rate48k} {
		var buf bytes.Buffer
		if err := WriteWAV(&buf, samples, rate); err != nil {
			t.Fatal(err)
		}
		if got, want := buf.Len(), wavHeaderLen+2*len(samples); got != want {
			t.Errorf("rate %d: %d bytes written, want %d", rate, got, want)
		}
		got, gotRate, err := ReadWAV(&buf)
		if err != nil {
			t.Fatalf("rate %d: %v", rate, err)
		}
		if gotRate != rate || !slices.Equal(got, samples) {
			t.Errorf("rate %d: read back %v at %d Hz, want %v", rate, got, gotRate, samples)
		}
	}
}

func TestWriteWAVHeader(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteWAV(&buf, []int16{1, -2}, 16000); err != nil {
		t.Fatal(err)
	}
	want := riff(chunk("fmt ", fmtBody(1, 1, 16000, 16)), chunk("data", pcmBytes(1, -2)))
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("WriteWAV wrote\n%x\nwant\n%x", buf.Bytes(), want)
	}
}

func TestWriteWAVLong(t *testing.T) {
	// Longer than the internal encode buffer, so the chunked path runs.
	samples := make([]int16, 10007)
	for i := range samples {
		samples[i] = int16(i * 7)
	}
	var buf bytes.Buffer
	if err := WriteWAV(&buf, samples, 8000); err != nil {
		t.Fatal(err)
	}
	got, _, err := ReadWAV(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, samples) {
		t.Error("long round trip differs")
	}
}

func TestWriteWAVErrors(t *testing.T) {
	if err := WriteWAV(io.Discard, nil, 0); err == nil {
		t.Error("rate 0: no error")
	}
	wantErr := errors.New("disk full")
	err := WriteWAV(failWriter{wantErr}, []int16{1}, 8000)
	if !errors.Is(err, wantErr) {
		t.Errorf("failing writer: got %v, want it wrapped", err)
	}
}

type failWriter struct{ err error }

func (f failWriter) Write([]byte) (int, error) { return 0, f.err }

func TestReadWAVStereoWithExtraChunks(t *testing.T) {
	in := riff(
		chunk("LIST", []byte("INFOx")), // odd size: padded
		chunk("fmt ", fmtBody(1, 2, 44100, 16)),
		chunk("fact", []byte{3, 0, 0, 0}),
		chunk("data", pcmBytes(
			100, 300, // -> 200
			-100, -301, // -> -200 (truncated towards zero)
			math.MaxInt16, math.MaxInt16, // no overflow
			math.MinInt16, math.MinInt16,
		)),
		chunk("id3 ", []byte("trailing metadata")),
	)
	got, rate, err := ReadWAV(bytes.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []int16{200, -200, math.MaxInt16, math.MinInt16}
	if rate != 44100 || !slices.Equal(got, want) {
		t.Errorf("got %v at %d Hz, want %v at 44100 Hz", got, rate, want)
	}
}

func TestReadWAVExtensible(t *testing.T) {
	in := riff(
		chunk("fmt ", extensibleBody(2, 48000, 16, 1)),
		chunk("data", pcmBytes(10, 20, 30, 40)),
	)
	got, rate, err := ReadWAV(bytes.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if want := []int16{15, 35}; rate != 48000 || !slices.Equal(got, want) {
		t.Errorf("got %v at %d Hz, want %v at 48000 Hz", got, rate, want)
	}
}

func TestReadWAVStreamedDataSize(t *testing.T) {
	for _, size := range []uint32{0, 0xFFFFFFFF, espeakStreamSize} {
		in := riff(chunk("fmt ", fmtBody(1, 1, 22050, 16)))
		in = binary.LittleEndian.AppendUint32(append(in, "data"...), size)
		// A killed writer may leave half a sample: it is dropped.
		in = append(in, pcmBytes(1, 2, 3)...)
		in = append(in, 0x7f)
		got, rate, err := ReadWAV(bytes.NewReader(in))
		if err != nil {
			t.Fatalf("size %#x: %v", size, err)
		}
		if want := []int16{1, 2, 3}; rate != 22050 || !slices.Equal(got, want) {
			t.Errorf("size %#x: got %v at %d Hz, want %v", size, got, rate, want)
		}
	}
}

func TestReadWAVErrors(t *testing.T) {
	good := fmtBody(1, 1, 16000, 16)
	data := chunk("data", pcmBytes(1, 2))
	truncatedData := riff(chunk("fmt ", good), data)
	truncatedData = truncatedData[:len(truncatedData)-1]

	tests := []struct {
		name      string
		in        []byte
		want      error
		truncated bool
	}{
		{"empty", nil, ErrNotWAV, true},
		{"short header", []byte("RIFF\x00\x00"), ErrNotWAV, true},
		{"not RIFF", []byte("OggS\x00\x00\x00\x00WAVEfmt "), ErrNotWAV, false},
		{"not WAVE", chunk("RIFF", []byte("AVI LIST")), ErrNotWAV, false},
		{"RF64", append([]byte("RF64\xff\xff\xff\xffWAVE"), chunk("ds64", make([]byte, 28))...), ErrUnsupportedWAV, false},
		{"float", riff(chunk("fmt ", fmtBody(3, 1, 16000, 32)), data), ErrUnsupportedWAV, false},
		{"mu-law", riff(chunk("fmt ", fmtBody(7, 1, 8000, 8)), data), ErrUnsupportedWAV, false},
		{"8 bit", riff(chunk("fmt ", fmtBody(1, 1, 8000, 8)), data), ErrUnsupportedWAV, false},
		{"24 bit", riff(chunk("fmt ", fmtBody(1, 1, 48000, 24)), data), ErrUnsupportedWAV, false},
		{"extensible float", riff(chunk("fmt ", extensibleBody(1, 48000, 32, 3)), data), ErrUnsupportedWAV, false},
		{"extensible short", riff(chunk("fmt ", fmtBody(wavFormatExtensible, 1, 48000, 16)), data), ErrNotWAV, false},
		{"fmt too short", riff(chunk("fmt ", good[:14]), data), ErrNotWAV, false},
		{"zero channels", riff(chunk("fmt ", fmtBody(1, 0, 16000, 16)), data), ErrNotWAV, false},
		{"zero rate", riff(chunk("fmt ", fmtBody(1, 1, 0, 16)), data), ErrNotWAV, false},
		{"no fmt", riff(chunk("LIST", []byte("INFO"))), ErrNotWAV, false},
		{"data before fmt", riff(data, chunk("fmt ", good)), ErrNotWAV, false},
		{"no data", riff(chunk("fmt ", good)), ErrNotWAV, false},
		{"truncated fmt", riff(chunk("fmt ", good))[:30], ErrNotWAV, true},
		{"truncated chunk header", append(riff(chunk("fmt ", good)), 'd', 'a'), ErrNotWAV, true},
		{"truncated data", truncatedData, ErrNotWAV, true},
		{"truncated unknown chunk", riff(chunk("LIST", make([]byte, 64)))[:40], ErrNotWAV, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			samples, rate, err := ReadWAV(bytes.NewReader(tt.in))
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if got := errors.Is(err, io.ErrUnexpectedEOF); got != tt.truncated {
				t.Errorf("errors.Is(err, io.ErrUnexpectedEOF) = %v, want %v (err %v)", got, tt.truncated, err)
			}
			if samples != nil || rate != 0 {
				t.Errorf("got %d samples at %d Hz alongside an error", len(samples), rate)
			}
		})
	}
}

func TestReadWAVReaderError(t *testing.T) {
	wantErr := errors.New("connection reset")
	in := io.MultiReader(bytes.NewReader(riff(chunk("fmt ", fmtBody(1, 1, 8000, 16)))), errReader{wantErr})
	_, _, err := ReadWAV(in)
	if !errors.Is(err, wantErr) {
		t.Fatalf("err = %v, want it to wrap %v", err, wantErr)
	}
	if errors.Is(err, ErrNotWAV) {
		t.Errorf("a failing reader is reported as a bad WAV: %v", err)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func TestWAVWriter(t *testing.T) {
	var out seekBuffer
	prefix := []byte("container header")
	out.Write(prefix)

	w, err := NewWAVWriter(&out, Rate16k)
	if err != nil {
		t.Fatal(err)
	}
	frames := [][]int16{{1, 2, 3}, {}, {-4, math.MaxInt16, math.MinInt16}}
	var all []int16
	for _, s := range frames {
		if err := w.WriteFrame(Frame{Samples: s, SampleRate: Rate16k}); err != nil {
			t.Fatal(err)
		}
		all = append(all, s...)
	}

	// Before Close the header sizes are placeholders, which still read to EOF.
	got, _, err := ReadWAV(bytes.NewReader(out.b[len(prefix):]))
	if err != nil || !slices.Equal(got, all) {
		t.Errorf("unclosed recording: got %v, %v; want %v", got, err, all)
	}

	if err := w.WriteFrame(Frame{Samples: []int16{9}, SampleRate: Rate8k}); err == nil {
		t.Error("frame at another rate: no error")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := w.WriteFrame(Frame{Samples: []int16{9}, SampleRate: Rate16k}); err == nil {
		t.Error("WriteFrame after Close: no error")
	}

	var want bytes.Buffer
	want.Write(prefix)
	if err := WriteWAV(&want, all, Rate16k); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.b, want.Bytes()) {
		t.Errorf("closed recording\n%x\nwant (as WriteWAV)\n%x", out.b, want.Bytes())
	}
	if out.pos != len(out.b) {
		t.Errorf("Close left the writer at %d, want the end (%d)", out.pos, len(out.b))
	}
}

func TestNewWAVWriterInvalidRate(t *testing.T) {
	if _, err := NewWAVWriter(&seekBuffer{}, -8000); err == nil {
		t.Error("negative rate: no error")
	}
}

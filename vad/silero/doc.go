// Package silero is a [vad.Detector] backed by the Silero VAD neural
// network, run with ONNX Runtime.
//
// Silero tells speech from other sound: noise, clicks and hum that
// [vad.Energy], which only compares levels, takes for speech whenever it
// is loud enough. It is the accurate option; [vad.Energy] is
// the one that needs no setup. Both give a probability per frame for a
// [vad.Segmenter], so either can be used behind the same interface.
//
// # Files
//
// Two files are loaded at run time, not linked into the binary:
//
//   - the ONNX Runtime shared library, libonnxruntime.so.1, taken from the
//     npm package onnxruntime-node@1.30.0;
//   - the Silero VAD v5 model, silero_vad.onnx, taken from the npm package
//     @livekit/agents-plugin-silero@1.9.0.
//
// "make models" fetches both with npm pack into $HOLDLINE_MODELS_DIR
// (default ~/.cache/holdline). [WithLibrary] and [WithModel] point
// elsewhere, as do the HOLDLINE_ONNXRUNTIME_LIB and HOLDLINE_SILERO_MODEL
// environment variables. When a file is missing or cannot be loaded, [New]
// returns an error wrapping [ErrUnavailable] that says how to get it; a
// caller can then fall back to [vad.Energy].
//
// ONNX Runtime is loaded once per process, by the first successful [New],
// and stays loaded: a later New naming a different library fails. It needs
// cgo; in a program built with CGO_ENABLED=0, New always returns an error
// wrapping [ErrUnavailable].
//
// # Use
//
// The model works on windows of 512 samples at 16 kHz (32 ms) or 256 at
// 8 kHz, carrying a recurrent state from one window to the next. Detect
// accepts frames of any length, buffers them into windows and returns the
// probability of the latest window; see [Detector.Detect]. In steady state
// it allocates nothing and, on one thread, keeps up with a real-time stream
// on about 1% of a CPU core (0.1 ms per 20 ms frame on a 2 vCPU Xeon).
//
// A Detector is not safe for concurrent use: each audio stream gets its
// own, and Close frees it. New loads the model into an ONNX Runtime session
// of the Detector's own, which takes some 60 ms and 10 MB: make Detectors
// before a call starts, or keep them in a pool and Reset them between
// calls.
package silero

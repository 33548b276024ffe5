// Package localaudio connects a session to this computer's microphone and
// speaker, so an agent can be talked to without a phone line or a browser.
//
// Open opens both. The microphone is captured through pion/mediadevices
// (GetUserMedia and its malgo-based microphone driver); the speaker plays
// through malgo, the miniaudio binding that driver uses, so both sides go
// through the same audio backend (PulseAudio or ALSA on Linux, Core Audio,
// WASAPI). A Device is then the two ends of the pipeline every transport
// shares:
//
//	dev, err := localaudio.Open(ctx)
//	...
//	sess, err := runtime.New(agent,
//		runtime.WithOutput(dev, dev.Rate()),
//		engine.WithInput(engine.InputConfig{Rate: media.Rate16k}))
//	...
//	go sess.Run(ctx)
//	err = dev.Pump(ctx, sess.PushAudio)
//
// Echo matters more here than on any other transport: laptop speakers are
// loud and a few centimetres from the microphone. The session's echo
// canceller takes its reference from what its player wrote to the Device, so
// the Device keeps as little audio as it can between that write and the
// speaker (at most 60 ms). That buffer is also the only audio a barge-in
// cannot take back.
//
// Without a microphone or a speaker Open returns ErrNoMicrophone or
// ErrNoSpeaker. Backends that only pretend to be a device, miniaudio's null
// backend and ALSA's "null" PCM (what a machine without a sound card lists),
// do not count as one unless asked for by name (WithMicrophone) or backend
// (WithPlaybackBackends).
//
// Importing this package registers mediadevices' microphone driver, which
// lists the capture devices when the program starts.
//
// malgo compiles miniaudio into the program with cgo, so building needs a
// C compiler (Debian package gcc) and no audio development package; at run
// time miniaudio loads the sound system's library itself: ALSA's
// libasound2 or PulseAudio's libpulse0 on Debian. PortAudio is not used.
package localaudio

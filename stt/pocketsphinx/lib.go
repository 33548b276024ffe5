package pocketsphinx

import "errors"

// Sentinel errors. The errors returned wrap them with detail, so test with
// errors.Is.
var (
	// ErrMissingLibrary means libpocketsphinx or libsphinxbase cannot be
	// loaded. The message names the Debian packages to install.
	ErrMissingLibrary = errors.New("pocketsphinx: library unavailable (apt-get install " + aptPackages + ")")
	// ErrMissingModel means the acoustic model or the dictionary is not
	// where it was looked for. The message names the Debian package that
	// installs them.
	ErrMissingModel = errors.New("pocketsphinx: model unavailable (apt-get install " + modelPackage + ")")
	// ErrUnknownWords means phrases given to Grammar or WithPhrases use
	// words the pronouncing dictionary does not have: pocketsphinx cannot
	// recognise a word it cannot pronounce.
	ErrUnknownWords = errors.New("pocketsphinx: words missing from the dictionary")
	// ErrClosed is returned by a Recognizer or Stream used after Close.
	ErrClosed = errors.New("pocketsphinx: closed")
	// ErrOverrun is returned by Stream.Write and Stream.EndOfSpeech when
	// the decoder has fallen so far behind that its queue stayed full for
	// the whole of the write timeout: the frame is dropped rather than
	// holding up the caller's audio path.
	ErrOverrun = errors.New("pocketsphinx: decoder is falling behind")
)

// The libraries are looked up under these names, in order: the runtime
// package (libpocketsphinx3, libsphinxbase3) ships the first, the -dev
// packages add the second. libpocketsphinx needs libsphinxbase, so loading
// it loads both; libsphinxbase is opened by name as well because the
// configuration and logging functions live there.
var (
	psLibNames = []string{"libpocketsphinx.so.3", "libpocketsphinx.so"}
	sbLibNames = []string{"libsphinxbase.so.3", "libsphinxbase.so"}
)

const (
	// aptPackages bring the libraries (libpocketsphinx3 and
	// libsphinxbase3 come with pocketsphinx) and the US English model.
	aptPackages = "pocketsphinx pocketsphinx-en-us"
	// modelPackage installs DefaultModelDir.
	modelPackage = "pocketsphinx-en-us"
)

// missingError keeps its own message while wrapping a sentinel.
type missingError struct {
	msg string
	err error
}

func (e *missingError) Error() string { return e.msg }
func (e *missingError) Unwrap() error { return e.err }

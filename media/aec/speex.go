package aec

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Request codes from speex/speex_echo.h and speex/speex_preprocess.h
// (speexdsp 1.2), copied so that building needs no speex headers.
enum {
	AEC_ECHO_SET_SAMPLING_RATE = 24,

	AEC_PRE_SET_DENOISE = 0,
	AEC_PRE_SET_AGC = 2,
	AEC_PRE_SET_VAD = 4,
	AEC_PRE_GET_VAD = 5,
	AEC_PRE_SET_DEREVERB = 8,
	AEC_PRE_SET_NOISE_SUPPRESS = 18,
	AEC_PRE_SET_ECHO_SUPPRESS = 20,
	AEC_PRE_SET_ECHO_SUPPRESS_ACTIVE = 22,
	AEC_PRE_SET_ECHO_STATE = 24,
};

// The speexdsp functions used, resolved with dlsym. The states are opaque;
// spx_int16_t is int16_t and the ctl arguments are spx_int32_t (int32_t).
typedef struct {
	void *(*echo_state_init)(int frame_size, int filter_length);
	void (*echo_cancellation)(void *st, const int16_t *rec, const int16_t *play, int16_t *out);
	int (*echo_ctl)(void *st, int request, void *ptr);
	void (*echo_state_reset)(void *st);
	void (*echo_state_destroy)(void *st);
	void *(*preprocess_state_init)(int frame_size, int sampling_rate);
	int (*preprocess_ctl)(void *st, int request, void *ptr);
	int (*preprocess_run)(void *st, int16_t *x);
	void (*preprocess_state_destroy)(void *st);
} aec_lib;

// aec_open loads the library name and resolves every function into l.
// It returns 0 on success, 1 if the library cannot be loaded and 2 if it
// lacks a function; err then holds the reason.
static int aec_open(const char *name, aec_lib *l, char *err, size_t errlen) {
	memset(l, 0, sizeof *l);
	dlerror();
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *e = dlerror();
		snprintf(err, errlen, "%s", e ? e : "dlopen failed");
		return 1;
	}
#define AEC_SYM(field) do { \
		*(void **)(&l->field) = dlsym(h, "speex_" #field); \
		if (l->field == NULL) { \
			snprintf(err, errlen, "%s has no symbol speex_" #field, name); \
			dlclose(h); \
			memset(l, 0, sizeof *l); \
			return 2; \
		} \
	} while (0)
	AEC_SYM(echo_state_init);
	AEC_SYM(echo_cancellation);
	AEC_SYM(echo_ctl);
	AEC_SYM(echo_state_reset);
	AEC_SYM(echo_state_destroy);
	AEC_SYM(preprocess_state_init);
	AEC_SYM(preprocess_ctl);
	AEC_SYM(preprocess_run);
	AEC_SYM(preprocess_state_destroy);
#undef AEC_SYM
	// The handle is never closed: the library stays loaded for the life
	// of the process, as the function pointers in l require.
	return 0;
}

static void *aec_echo_new(const aec_lib *l, int frame, int filter, int rate) {
	void *st = l->echo_state_init(frame, filter);
	if (st != NULL) {
		int32_t r = rate;
		l->echo_ctl(st, AEC_ECHO_SET_SAMPLING_RATE, &r);
	}
	return st;
}

// aec_pre_new makes a preprocessor that only suppresses the residual echo
// of echo. Speex applies its echo suppression through the denoiser's
// spectral gain (with the denoiser off the gain is forced to 1), so the
// denoiser stays on with a noise attenuation of 0 dB: the gain floor for
// noise is then 1 and only residual echo is attenuated. AGC and dereverb
// are switched off; the VAD is off by default and setting it makes speex
// print a warning, so it is only switched off if found on.
static void *aec_pre_new(const aec_lib *l, void *echo, int frame, int rate, int suppress, int suppress_active) {
	void *st = l->preprocess_state_init(frame, rate);
	if (st == NULL) {
		return NULL;
	}
	int32_t v;
	v = 1; l->preprocess_ctl(st, AEC_PRE_SET_DENOISE, &v);
	v = 0; l->preprocess_ctl(st, AEC_PRE_SET_NOISE_SUPPRESS, &v);
	v = 0; l->preprocess_ctl(st, AEC_PRE_SET_AGC, &v);
	v = 0; l->preprocess_ctl(st, AEC_PRE_SET_DEREVERB, &v);
	v = 0; l->preprocess_ctl(st, AEC_PRE_GET_VAD, &v);
	if (v != 0) {
		v = 0; l->preprocess_ctl(st, AEC_PRE_SET_VAD, &v);
	}
	v = suppress; l->preprocess_ctl(st, AEC_PRE_SET_ECHO_SUPPRESS, &v);
	v = suppress_active; l->preprocess_ctl(st, AEC_PRE_SET_ECHO_SUPPRESS_ACTIVE, &v);
	l->preprocess_ctl(st, AEC_PRE_SET_ECHO_STATE, echo);
	return st;
}

static void aec_cancel(const aec_lib *l, void *echo, void *pre, const int16_t *rec, const int16_t *play, int16_t *out) {
	l->echo_cancellation(echo, rec, play, out);
	if (pre != NULL) {
		l->preprocess_run(pre, out);
	}
}

static void aec_reset(const aec_lib *l, void *echo) {
	l->echo_state_reset(echo);
}

static void aec_free(const aec_lib *l, void *echo, void *pre) {
	if (pre != NULL) {
		l->preprocess_state_destroy(pre);
	}
	if (echo != NULL) {
		l->echo_state_destroy(echo);
	}
}
*/
import "C"

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"
)

// cLib is the table of speexdsp functions.
type cLib = C.aec_lib

var lib struct {
	once sync.Once
	l    *cLib // in C memory, never freed
	err  error
}

// loadLib loads libspeexdsp once per process.
func loadLib() (*cLib, error) {
	lib.once.Do(func() { lib.l, lib.err = openLib(libNames) })
	return lib.l, lib.err
}

// openLib tries each name in turn and returns the functions of the first
// that loads with all of them.
func openLib(names []string) (*cLib, error) {
	l := (*C.aec_lib)(C.calloc(1, C.size_t(unsafe.Sizeof(C.aec_lib{}))))
	if l == nil {
		return nil, &unavailableError{"aec: out of memory loading libspeexdsp"}
	}
	var (
		errbuf   [512]C.char
		reasons  []string
		badFound string // a library that loaded but lacks a function
	)
	for _, name := range names {
		cname := C.CString(name)
		rc := C.aec_open(cname, l, &errbuf[0], C.size_t(len(errbuf)))
		C.free(unsafe.Pointer(cname))
		if rc == 0 {
			return l, nil
		}
		reason := C.GoString(&errbuf[0])
		reasons = append(reasons, reason)
		if rc == 2 && badFound == "" {
			badFound = reason
		}
	}
	C.free(unsafe.Pointer(l))
	if badFound != "" {
		return nil, &unavailableError{fmt.Sprintf(
			"aec: %s: install the Debian package %s (speexdsp 1.2)", badFound, libPackage)}
	}
	return nil, &unavailableError{fmt.Sprintf(
		"aec: %s not found: install the Debian package %s (%s)",
		names[0], libPackage, strings.Join(reasons, "; "))}
}

// speexState is the C side of one Canceller. It holds no Go pointers, so
// that a copy can go to the cleanup that frees it if the Canceller is
// dropped without Close.
type speexState struct {
	l    *cLib
	echo unsafe.Pointer // SpeexEchoState*
	pre  unsafe.Pointer // SpeexPreprocessState*, nil without suppression
}

// newSpeex makes the echo canceller and, if suppress, the preprocessor
// that removes its residual echo.
func newSpeex(l *cLib, frame, filter, rate int, suppress bool, echoSuppress, echoSuppressActive int) (speexState, error) {
	s := speexState{l: l}
	s.echo = C.aec_echo_new(l, C.int(frame), C.int(filter), C.int(rate))
	if s.echo == nil {
		return speexState{}, fmt.Errorf("aec: speex_echo_state_init(%d, %d) failed", frame, filter)
	}
	if suppress {
		s.pre = C.aec_pre_new(l, s.echo, C.int(frame), C.int(rate), C.int(echoSuppress), C.int(echoSuppressActive))
		if s.pre == nil {
			s.free()
			return speexState{}, fmt.Errorf("aec: speex_preprocess_state_init(%d, %d) failed", frame, rate)
		}
	}
	return s, nil
}

// cancel runs one frame through the canceller and the preprocessor.
// rec and out may not alias; play is the aligned reference.
func (s speexState) cancel(rec, play, out []int16) {
	C.aec_cancel(s.l, s.echo, s.pre,
		(*C.int16_t)(unsafe.Pointer(&rec[0])),
		(*C.int16_t)(unsafe.Pointer(&play[0])),
		(*C.int16_t)(unsafe.Pointer(&out[0])))
}

// reset forgets the adapted echo path.
func (s speexState) reset() { C.aec_reset(s.l, s.echo) }

// free destroys both states.
func (s speexState) free() { C.aec_free(s.l, s.echo, s.pre) }

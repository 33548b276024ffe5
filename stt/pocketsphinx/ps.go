package pocketsphinx

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The functions used, with their signatures in pocketsphinx and sphinxbase
// 5prealpha (Debian's 0.8+5prealpha, libpocketsphinx.so.3 and
// libsphinxbase.so.3), declared here so that building needs no headers.
// They differ from pocketsphinx 0.8 proper, whose ps_start_utt and
// ps_get_hyp took an utterance id; the disassembly of the Debian library
// confirms ps_start_utt(ps) and ps_get_hyp(ps, &score) (only rdi and rsi
// read), and it exports ps_start_stream, which 0.8 lacks. pocketsphinx 5.0
// has no libsphinxbase (its configuration API moved into libpocketsphinx
// and changed), so it is not found here rather than misused.
//
// The decoder and configuration are opaque; arg_t is only passed through.
typedef struct {
	const void *(*args)(void);                                         // ps_args
	void *(*cmd_ln_init)(void *inout, const void *defn, int32_t strict, ...); // variadic, NULL-terminated
	int (*cmd_ln_free_r)(void *config);
	void *(*init)(void *config);                                       // ps_init; retains config
	int (*free)(void *ps);                                             // ps_free
	int (*start_utt)(void *ps);
	int (*process_raw)(void *ps, const int16_t *data, size_t n, int no_search, int full_utt);
	int (*end_utt)(void *ps);
	const char *(*get_hyp)(void *ps, int32_t *out_best_score);
	void (*err_set_logfp)(FILE *fp);
	void (*err_set_callback)(void (*cb)(void *user, int lvl, const char *fmt, ...), void *user);
} psgo_lib;

// Levels of sphinxbase's err_lvl_t.
enum { PSGO_ERR_DEBUG, PSGO_ERR_INFO, PSGO_ERR_INFOCONT, PSGO_ERR_WARN, PSGO_ERR_ERROR, PSGO_ERR_FATAL };

// sphinxbase logs through one process-wide callback. Ours keeps the errors
// logged on the calling thread, so that a failing call can say why, and a
// call that logs an error but goes on (as ps_init does with a grammar that
// refers to an undefined rule) can be failed: a cgo call runs on one OS
// thread from start to end, and pocketsphinx calls the callback from the
// thread that called it. Information and warnings are dropped.
static __thread char psgo_errbuf[1024];
static __thread size_t psgo_errlen;

static void psgo_log(void *user, int lvl, const char *fmt, ...) {
	(void)user;
	if (lvl < PSGO_ERR_ERROR || psgo_errlen >= sizeof psgo_errbuf - 1) {
		return;
	}
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(psgo_errbuf + psgo_errlen, sizeof psgo_errbuf - psgo_errlen, fmt, ap);
	va_end(ap);
	if (n > 0) {
		psgo_errlen += (size_t)n;
		if (psgo_errlen > sizeof psgo_errbuf - 1) {
			psgo_errlen = sizeof psgo_errbuf - 1;
		}
	}
}

static void psgo_err_clear(void) {
	psgo_errlen = 0;
	psgo_errbuf[0] = 0;
}

static void psgo_err_copy(char *err, size_t errlen) {
	snprintf(err, errlen, "%s", psgo_errbuf);
}

// psgo_open_one loads one library, trying each name in turn; on failure err
// holds the reasons.
static void *psgo_open_one(const char **names, int n, char *err, size_t errlen) {
	size_t used = 0;
	err[0] = 0;
	for (int i = 0; i < n; i++) {
		dlerror();
		void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
		if (h != NULL) {
			return h;
		}
		const char *e = dlerror();
		int k = snprintf(err + used, errlen - used, "%s%s", used ? "; " : "", e ? e : "dlopen failed");
		if (k > 0 && used + (size_t)k < errlen) {
			used += (size_t)k;
		}
	}
	return NULL;
}

// psgo_open loads both libraries and resolves every function into l. It
// returns 0 on success, 1 if a library cannot be loaded and 2 if one lacks
// a function; err then holds the reason. The handles are never closed: the
// function pointers in l need the libraries for the life of the process.
static int psgo_open(const char **psnames, int nps, const char **sbnames, int nsb, psgo_lib *l, char *err, size_t errlen) {
	memset(l, 0, sizeof *l);
	void *sb = psgo_open_one(sbnames, nsb, err, errlen);
	if (sb == NULL) {
		return 1;
	}
	void *ps = psgo_open_one(psnames, nps, err, errlen);
	if (ps == NULL) {
		return 1;
	}
#define PSGO_SYM(h, field, name) do { \
		*(void **)(&l->field) = dlsym(h, name); \
		if (l->field == NULL) { \
			snprintf(err, errlen, "no symbol %s", name); \
			memset(l, 0, sizeof *l); \
			return 2; \
		} \
	} while (0)
	PSGO_SYM(ps, args, "ps_args");
	PSGO_SYM(ps, init, "ps_init");
	PSGO_SYM(ps, free, "ps_free");
	PSGO_SYM(ps, start_utt, "ps_start_utt");
	PSGO_SYM(ps, process_raw, "ps_process_raw");
	PSGO_SYM(ps, end_utt, "ps_end_utt");
	PSGO_SYM(ps, get_hyp, "ps_get_hyp");
	PSGO_SYM(sb, cmd_ln_init, "cmd_ln_init");
	PSGO_SYM(sb, cmd_ln_free_r, "cmd_ln_free_r");
	PSGO_SYM(sb, err_set_logfp, "err_set_logfp");
	PSGO_SYM(sb, err_set_callback, "err_set_callback");
#undef PSGO_SYM
	// 0.8 has no ps_start_stream, and its ps_start_utt and ps_get_hyp
	// take more arguments than declared above.
	if (dlsym(ps, "ps_start_stream") == NULL) {
		snprintf(err, errlen, "not pocketsphinx 5prealpha (no ps_start_stream)");
		memset(l, 0, sizeof *l);
		return 2;
	}

	// Quiet: messages go to our callback, which keeps warnings and errors
	// for the calling thread only. The configuration dumps sphinxbase
	// writes straight to its log file go to /dev/null; without a file it
	// would print them on stderr (and with logging disabled, a NULL file,
	// some versions crash in fprintf). Setting this once here rather than
	// with -logfn matters: -logfn swaps the process-wide log file on every
	// decoder created, under the feet of decoders logging on other threads.
	FILE *devnull = fopen("/dev/null", "w");
	if (devnull != NULL) {
		l->err_set_logfp(devnull);
	}
	l->err_set_callback(psgo_log, NULL);
	return 0;
}

// PSGO_MAXARGS is the most name/value strings psgo_new passes on.
#define PSGO_MAXARGS 48

// psgo_new makes a decoder from name/value pairs in a (PSGO_MAXARGS
// entries, the unused ones NULL). cmd_ln_init is variadic, so the call
// passes every slot: it stops at the first NULL name.
static void *psgo_new(const psgo_lib *l, char **a, char *err, size_t errlen) {
	psgo_err_clear();
	void *config = l->cmd_ln_init(NULL, l->args(), 1,
		a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9],
		a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19],
		a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29],
		a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39],
		a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], (char *)NULL);
	if (config == NULL) {
		psgo_err_copy(err, errlen);
		return NULL;
	}
	void *ps = l->init(config);
	// The decoder holds its own reference to the configuration.
	l->cmd_ln_free_r(config);
	psgo_err_copy(err, errlen);
	return ps;
}

static int psgo_start(const psgo_lib *l, void *ps) {
	return l->start_utt(ps);
}

static int psgo_process(const psgo_lib *l, void *ps, const int16_t *data, size_t n, int full) {
	return l->process_raw(ps, data, n, 0, full);
}

// psgo_end ends the utterance and returns the best hypothesis (owned by the
// decoder, valid until its next call), or NULL.
static const char *psgo_end(const psgo_lib *l, void *ps, int *rc) {
	*rc = l->end_utt(ps);
	int32_t score = 0;
	return l->get_hyp(ps, &score);
}

static const char *psgo_hyp(const psgo_lib *l, void *ps) {
	int32_t score = 0;
	return l->get_hyp(ps, &score);
}

static void psgo_free(const psgo_lib *l, void *ps) {
	l->free(ps);
}
*/
import "C"

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"github.com/holdline/holdline/internal/cheap"
)

// maxArgs is PSGO_MAXARGS.
const maxArgs = C.PSGO_MAXARGS

// cLib is the table of pocketsphinx functions.
type cLib = C.psgo_lib

var lib struct {
	once sync.Once
	l    *cLib // in C memory, never freed
	err  error
}

// loadLib loads the libraries once per process.
func loadLib() (*cLib, error) {
	lib.once.Do(func() {
		lib.l, lib.err = openLib(psLibNames, sbLibNames)
		if lib.err == nil {
			// Decoders are made and freed with the calls; without this
			// the memory of those freed stays with the process (see
			// cheap.Tune). BenchmarkLocalEngines, four rounds of 20
			// calls: 12% above the start after them with two arenas
			// alone, 17% with glibc's defaults, 5.5% with both.
			cheap.Tune(mallocArenas, mmapThreshold)
		}
	})
	return lib.l, lib.err
}

// The C allocator's settings once pocketsphinx is loaded: two arenas, and
// blocks of 64 KiB or more mapped apart.
const (
	mallocArenas  = 2
	mmapThreshold = 64 << 10
)

// openLib loads the first of psNames and of sbNames that loads, and
// resolves the functions used.
func openLib(psNames, sbNames []string) (*cLib, error) {
	l := (*C.psgo_lib)(C.calloc(1, C.size_t(unsafe.Sizeof(C.psgo_lib{}))))
	if l == nil {
		return nil, &missingError{"pocketsphinx: out of memory loading the library", ErrMissingLibrary}
	}
	cps, freePS := cStrings(psNames, 0)
	defer freePS()
	csb, freeSB := cStrings(sbNames, 0)
	defer freeSB()
	var errbuf [1024]C.char
	rc := C.psgo_open(cps, C.int(len(psNames)), csb, C.int(len(sbNames)), l, &errbuf[0], C.size_t(len(errbuf)))
	if rc == 0 {
		return l, nil
	}
	C.free(unsafe.Pointer(l))
	reason := C.GoString(&errbuf[0])
	if rc == 2 {
		return nil, &missingError{fmt.Sprintf(
			"pocketsphinx: %s or %s: %s: install the Debian packages %s (pocketsphinx 5prealpha, as in Debian 12)",
			psNames[0], sbNames[0], reason, aptPackages), ErrMissingLibrary}
	}
	return nil, &missingError{fmt.Sprintf(
		"pocketsphinx: %s or %s not found: install the Debian packages %s (%s)",
		psNames[0], sbNames[0], aptPackages, reason), ErrMissingLibrary}
}

// cStrings returns ss as a C array of at least size C strings, NULL after
// the last, and a function freeing them.
func cStrings(ss []string, size int) (**C.char, func()) {
	n := max(size, len(ss)+1)
	arr := (**C.char)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof((*C.char)(nil)))))
	s := unsafe.Slice(arr, n)
	for i, v := range ss {
		s[i] = C.CString(v)
	}
	return arr, func() {
		for _, p := range s {
			C.free(unsafe.Pointer(p))
		}
		C.free(unsafe.Pointer(arr))
	}
}

// decoder is one pocketsphinx decoder. It is not safe for concurrent use:
// pocketsphinx decoders are not, so each belongs to one goroutine at a
// time.
type decoder struct {
	l  *cLib
	ps unsafe.Pointer // ps_decoder_t*
}

// newDecoder makes a decoder configured by args, name/value pairs such as
// "-hmm", dir.
func newDecoder(l *cLib, args []string) (*decoder, error) {
	if len(args)%2 != 0 || len(args) > maxArgs {
		return nil, fmt.Errorf("pocketsphinx: %d configuration strings (want pairs, at most %d)", len(args), maxArgs)
	}
	// cStrings ends the array with NULL, and calloc leaves the slots past
	// it NULL too.
	a, free := cStrings(args, maxArgs)
	defer free()
	var errbuf [1024]C.char
	ps := C.psgo_new(l, a, &errbuf[0], C.size_t(len(errbuf)))
	reason := strings.TrimSpace(C.GoString(&errbuf[0]))
	if ps != nil && reason != "" {
		// Made, but with errors on the way: a grammar rule left out,
		// a word without a pronunciation. It would not recognise what
		// it was configured for.
		C.psgo_free(l, ps)
		ps = nil
	}
	if ps == nil {
		if reason == "" {
			reason = "no reason given"
		}
		return nil, fmt.Errorf("pocketsphinx: cannot create the decoder: %s", oneLine(reason))
	}
	return &decoder{l: l, ps: ps}, nil
}

// start opens an utterance.
func (d *decoder) start() error {
	if rc := C.psgo_start(d.l, d.ps); rc < 0 {
		return fmt.Errorf("pocketsphinx: ps_start_utt failed (%d)", int(rc))
	}
	return nil
}

// process decodes 16 kHz samples of the open utterance.
func (d *decoder) process(x []int16) error { return d.processRaw(x, false) }

// processWhole decodes the whole of an utterance at once: its cepstral
// mean is then the utterance's own, not one carried over from before.
func (d *decoder) processWhole(x []int16) error { return d.processRaw(x, true) }

func (d *decoder) processRaw(x []int16, whole bool) error {
	if len(x) == 0 {
		return nil
	}
	full := C.int(0)
	if whole {
		full = 1
	}
	if rc := C.psgo_process(d.l, d.ps, (*C.int16_t)(unsafe.Pointer(&x[0])), C.size_t(len(x)), full); rc < 0 {
		return fmt.Errorf("pocketsphinx: ps_process_raw failed (%d)", int(rc))
	}
	return nil
}

// hyp returns the best hypothesis so far.
func (d *decoder) hyp() string {
	return C.GoString(C.psgo_hyp(d.l, d.ps))
}

// end closes the utterance and returns its best hypothesis.
func (d *decoder) end() (string, error) {
	var rc C.int
	h := C.GoString(C.psgo_end(d.l, d.ps, &rc))
	if rc < 0 {
		return "", fmt.Errorf("pocketsphinx: ps_end_utt failed (%d)", int(rc))
	}
	return h, nil
}

// decode decodes x as one utterance and returns its words.
func (d *decoder) decode(x []int16) (string, error) {
	if err := d.start(); err != nil {
		d.free()
		return "", err
	}
	if err := d.processWhole(x); err != nil {
		d.free()
		return "", err
	}
	text, err := d.end()
	if err != nil {
		d.free()
	}
	return text, err
}

// free releases the decoder; d must not be used again.
func (d *decoder) free() {
	if d.ps != nil {
		C.psgo_free(d.l, d.ps)
		d.ps = nil
	}
}

// oneLine joins the lines of a log excerpt.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " | ")), " ")
}

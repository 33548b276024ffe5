package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/holdline/holdline/examples/booking"
	"github.com/holdline/holdline/store"
)

// A second serve on a port another holds, tried as a new user would: it
// says the address is in use and that another holdline may be running,
// and fails before it touches the store: with the first one's store file
// locked it does not wait on the lock nor blame the store, and a store
// that does not exist yet is not created (nor its key).
func TestSecondServeOnAPortInUseSaysSoBeforeTheStore(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("HOLDLINE_TOKEN", "")
	t.Setenv(snapshotKeyEnv, "")
	dir := t.TempDir()
	locked := filepath.Join(dir, "locked.db")
	held, err := store.Open(context.Background(), "file:"+locked)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()

	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()

	for _, tc := range []struct {
		name, flag, addr string
		args             []string
	}{
		{"HTTP port, store locked", "--http", tcp.Addr().String(),
			[]string{"--http", tcp.Addr().String(), "--store", "file:" + locked}},
		{"HTTP port, new store", "--http", tcp.Addr().String(),
			[]string{"--http", tcp.Addr().String(), "--store", "file:" + filepath.Join(dir, "new-http.db")}},
		{"SIP port, store locked", "--sip", "udp:" + udp.LocalAddr().String(),
			[]string{"--http", "127.0.0.1:0", "--sip", "udp:" + udp.LocalAddr().String(), "--store", "file:" + locked}},
		{"SIP port, new store", "--sip", "udp:" + udp.LocalAddr().String(),
			[]string{"--http", "127.0.0.1:0", "--sip", "udp:" + udp.LocalAddr().String(), "--store", "file:" + filepath.Join(dir, "new-sip.db")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errs bytes.Buffer
			err := run(context.Background(), append([]string{"serve", "--agent", "booking"}, tc.args...), nil, &out, &errs)
			if err == nil {
				t.Fatal("serve started on a port in use")
			}
			t.Logf("holdline: %v", err)
			if !errors.Is(err, syscall.EADDRINUSE) {
				t.Errorf("err = %v; want it to wrap EADDRINUSE", err)
			}
			msg := err.Error()
			for _, want := range []string{tc.flag + " " + tc.addr + ": the address is in use", "another holdline serve may be running"} {
				if !strings.Contains(msg, want) {
					t.Errorf("err = %q; want it to say %q", msg, want)
				}
			}
			if strings.Contains(msg, "store") {
				t.Errorf("err = %q blames the store", msg)
			}
			if out.Len() > 0 {
				t.Errorf("serve printed %q as if it were serving", out.String())
			}
			for _, f := range []string{"new-http.db", "new-http.key", "new-sip.db", "new-sip.key"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
					t.Errorf("%s was created: the store was opened before the port", f)
				}
			}
		})
	}
}

// The start-up lines name the engine of every role and which are paid
// cloud services, following flags and the environment as build does, and
// never print the key.
func TestStartupNamesTheEnginesAndWhichArePaid(t *testing.T) {
	needEspeak(t)
	const key = "sk-test-9f8e7d6c5b4a-never-printed"
	for _, tc := range []struct {
		name, key, base string
		args            []string
		want, not       []string
	}{
		{"no key: all local", "", "", nil,
			[]string{
				"model:      the agent's own (*scripted.LLM)",
				"voice:      espeak-ng (local)",
				"recogniser: pocketsphinx, with the agent's phrases as its grammar (local)",
				"VAD:        energy detector (local)",
			},
			[]string{"paid", "OpenAI", "OPENAI_API_KEY"}},
		{"key for OpenAI: every role paid, and how to stay local", key, "", nil,
			[]string{
				"model:      the agent's own (*scripted.LLM)",
				"voice:      OpenAI gpt-4o-mini-tts, voice alloy, at https://api.openai.com/v1 (paid cloud service, OPENAI_API_KEY from the environment); backup espeak-ng (local)",
				"recogniser: OpenAI gpt-4o-mini-transcribe at https://api.openai.com/v1 (paid cloud service, OPENAI_API_KEY from the environment)",
				"VAD:        energy detector (local)",
				"OPENAI_API_KEY is set, so OpenAI runs the roles neither a flag nor the agent fills; to keep them on this machine: --stt pocketsphinx --tts espeak\n",
			}, nil},
		{"key, the model asked for by flag", key, "", []string{"--llm", "openai", "--model", "gpt-4.1-mini", "--stt", "pocketsphinx", "--tts", "espeak"},
			[]string{
				"model:      OpenAI gpt-4.1-mini at https://api.openai.com/v1 (paid cloud service, OPENAI_API_KEY from the environment)",
				"voice:      espeak-ng (local)",
				"recogniser: pocketsphinx",
			},
			[]string{"OPENAI_API_KEY is set, so"}},
		{"key, Realtime", key, "", []string{"--llm", "realtime"},
			[]string{
				"model:      OpenAI Realtime gpt-realtime, speech to speech, at https://api.openai.com/v1 (paid cloud service",
				"voice:      the model's own (OpenAI Realtime, voice alloy)",
				"recogniser: OpenAI Realtime's transcription, gpt-4o-mini-transcribe, at https://api.openai.com/v1 (paid cloud service",
			}, []string{"OPENAI_API_KEY is set, so"}},
		{"server on this machine", key, "http://127.0.0.1:9/v1", []string{"--llm", "openai"},
			[]string{"model:      OpenAI gpt-4o-mini at http://127.0.0.1:9/v1 (OpenAI-compatible server on this machine, OPENAI_API_KEY from the environment)"},
			[]string{"paid", "OPENAI_API_KEY is set, so"}},
		{"server elsewhere", key, "https://llm.example/v1", []string{"--llm", "openai"},
			[]string{"model:      OpenAI gpt-4o-mini at https://llm.example/v1 (OpenAI-compatible server elsewhere: it may charge; OPENAI_API_KEY from the environment)"},
			nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OPENAI_API_KEY", tc.key)
			t.Setenv("OPENAI_BASE_URL", tc.base)
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			var pf providerFlags
			pf.register(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			defer pf.closeShared()
			prov, err := pf.equip(booking.New(booking.NewRestaurant(8)), true)
			if err != nil {
				t.Fatal(err)
			}
			defer prov.Close()
			var b bytes.Buffer
			pf.printEngines(&b, prov.roles)
			got := b.String()
			t.Logf("\n%s", got)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("lacks %q", w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("says %q", n)
				}
			}
			if strings.Contains(got, key) || strings.Contains(got, "sk-") {
				t.Error("the key was printed")
			}
		})
	}
}

// serve, with a key in the environment and no provider flag, says at
// start-up that every role is a paid OpenAI service, after the URL line
// scripts read, and the key is nowhere in what it prints.
func TestServePrintsItsEnginesAndNeverTheKey(t *testing.T) {
	const key = "sk-test-serve-0123456789-never-printed"
	t.Setenv("OPENAI_API_KEY", key)
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("HOLDLINE_TOKEN", "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	outR, outW := io.Pipe()
	var errs bytes.Buffer // read once serve has returned
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--agent", "booking", "--http", "127.0.0.1:0", "--tts-backup", "none"}, nil, outW, &errs)
		outW.Close()
	}()
	var lines []string
	sc := bufio.NewScanner(outR)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.HasPrefix(sc.Text(), "OPENAI_API_KEY is set") {
			break
		}
	}
	cancel()
	go io.Copy(io.Discard, outR)
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("serve: %v\nstderr: %s", err, errs.String())
	}
	got := strings.Join(lines, "\n")
	t.Logf("\n%s", got)
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "Holdline is serving the booking agent at http://127.0.0.1:") {
		t.Fatalf("the first line is not the URL:\n%s", got)
	}
	// The booking agent brings its own model; the key fills the others.
	if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "model:      the agent's own") }) {
		t.Error("no model line naming the agent's own model")
	}
	for _, role := range []string{"voice:", "recogniser:"} {
		found := false
		for _, l := range lines {
			if strings.HasPrefix(l, role) {
				found = true
				if !strings.Contains(l, "(paid cloud service, OPENAI_API_KEY from the environment)") {
					t.Errorf("%q does not say it is a paid cloud service", l)
				}
			}
		}
		if !found {
			t.Errorf("no %s line", role)
		}
	}
	if strings.Contains(got+errs.String(), key) {
		t.Error("the key was printed")
	}
}

// console prints its engines on standard error: standard output is the
// conversation, which scripts read line by line.
func TestConsolePrintsItsEnginesOnStandardError(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	var out, errs bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, []string{"console", "--agent", "booking", "--tts", "demo", "--tts-backup", "none", "--words-per-second", "20"}, strings.NewReader("hello\n"), &out, &errs); err != nil {
		t.Fatalf("console: %v\nstderr: %s", err, errs.String())
	}
	if want := "model:      the agent's own (*scripted.LLM)\nvoice:      demo tone at a speaking pace (local)\n"; errs.String() != want {
		t.Errorf("stderr = %q; want %q (typed: no recogniser, no VAD)", errs.String(), want)
	}
	if strings.Contains(out.String(), "model:") {
		t.Errorf("the engines are in the transcript:\n%s", out.String())
	}
}

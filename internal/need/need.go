// Package need decides what a test does when something it needs from the
// machine (a program, a library, a model) is missing: under make test,
// which installs all of it and sets HOLDLINE_REQUIRE_MODELS=1, the test
// fails, because a missing piece there is a broken install; anywhere else
// it is skipped, saying what to install.
package need

import (
	"os"
	"testing"
)

// Required reports whether the tests run where everything must be there
// (make test).
func Required() bool { return os.Getenv("HOLDLINE_REQUIRE_MODELS") == "1" }

// Missing fails tb under make test and skips it elsewhere, with args as
// the reason (as tb.Fatal and tb.Skip take them).
func Missing(tb testing.TB, args ...any) {
	tb.Helper()
	if Required() {
		tb.Fatal(args...)
	}
	tb.Skip(args...)
}

// Missingf is Missing with a format.
func Missingf(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if Required() {
		tb.Fatalf(format, args...)
	}
	tb.Skipf(format, args...)
}

package cli

import (
	"strings"
	"testing"
	"time"
)

// --sip-register is refused at start-up, with a reason naming what to
// fix, without --sip, without the password, with a bad expiry or AOR;
// it is repeatable, and the password is in no error.
func TestSIPRegisterFlags(t *testing.T) {
	const pw = "registrar-secret"
	for _, c := range []struct {
		name      string
		aors      []string
		serving   bool
		expires   time.Duration
		password  string
		wantInErr string
	}{
		{"no password", []string{"sip:100@pbx.example"}, true, 300 * time.Second, "", "HOLDLINE_SIP_PASSWORD"},
		{"no --sip", []string{"sip:100@pbx.example"}, false, 300 * time.Second, pw, "needs --sip"},
		{"expires too short", []string{"sip:100@pbx.example"}, true, 0, pw, "--sip-register-expires"},
		{"not an AOR", []string{"sip:100@pbx.example", "pbx.example"}, true, 300 * time.Second, pw, `--sip-register "pbx.example"`},
	} {
		_, err := sipRegistrations(c.aors, c.serving, c.expires, c.password)
		if err == nil || !strings.Contains(err.Error(), c.wantInErr) || strings.Contains(err.Error(), pw) {
			t.Errorf("%s: err %v, want one with %q and without the password", c.name, err, c.wantInErr)
		}
	}
	var l stringList
	for _, v := range []string{"sip:100@pbx.example", "sips:200@provider.example"} {
		if err := l.Set(v); err != nil {
			t.Fatal(err)
		}
	}
	regs, err := sipRegistrations(l, true, 300*time.Second, pw)
	if err != nil || len(regs.aors) != 2 || len(regs.opts) != 2 {
		t.Errorf("two AORs: %+v, %v", regs, err)
	}
	if regs, err := sipRegistrations(nil, false, 0, ""); err != nil || len(regs.aors) != 0 {
		t.Errorf("no --sip-register: %+v, %v", regs, err)
	}
}

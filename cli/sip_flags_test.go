package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSIPListenersFlag(t *testing.T) {
	got, err := parseSIPListeners("udp:0.0.0.0:5060, tcp:0.0.0.0:5060,tls:0.0.0.0:5061")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].network != "udp" || got[1].network != "tcp" || got[2].network != "tls" || got[2].addr != "0.0.0.0:5061" {
		t.Errorf("parsed %+v", got)
	}
	for _, bad := range []string{"ws:0.0.0.0:80", "udp:1.2.3.4:5060,udp:1.2.3.4:5061", "tcp:nohost", "0.0.0.0:5060"} {
		if _, err := parseSIPListeners(bad); err == nil || !strings.Contains(err.Error(), "--sip") {
			t.Errorf("--sip %s: err %v, want one naming --sip", bad, err)
		}
	}
}

func TestSIPTLSFlags(t *testing.T) {
	tlsOnly := []sipListen{{network: "tls", addr: "127.0.0.1:5061"}}
	udpOnly := []sipListen{{network: "udp", addr: "127.0.0.1:5060"}}
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		specs     []sipListen
		cert, key string
		wantInErr string
	}{
		{"tls without cert", tlsOnly, "", "", "--sip-cert"},
		{"tls without key", tlsOnly, junk, "", "--sip-key"},
		{"missing file", tlsOnly, filepath.Join(dir, "none.pem"), junk, "--sip-cert"},
		{"invalid file", tlsOnly, junk, junk, "--sip-cert"},
		{"cert without tls", udpOnly, junk, junk, "no tls: listener"},
	} {
		_, err := sipTLSConfig(c.specs, c.cert, c.key)
		if err == nil || !strings.Contains(err.Error(), c.wantInErr) {
			t.Errorf("%s: err %v, want one with %q", c.name, err, c.wantInErr)
		}
	}
	if cfg, err := sipTLSConfig(udpOnly, "", ""); cfg != nil || err != nil {
		t.Errorf("UDP only: %v, %v", cfg, err)
	}
}

func TestRTPPortsFlag(t *testing.T) {
	if lo, hi, err := portRange("--rtp-ports", "40000-40099"); err != nil || lo != 40000 || hi != 40099 {
		t.Errorf("40000-40099: %d-%d, %v", lo, hi, err)
	}
	for _, bad := range []string{"40099-40000", "0-10", "40000", "a-b"} {
		if _, _, err := portRange("--rtp-ports", bad); err == nil || !strings.HasPrefix(err.Error(), "--rtp-ports") {
			t.Errorf("%s: err %v, want one naming --rtp-ports", bad, err)
		}
	}
}

package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/webrtc/rtctest"
)

// sessionNetwork returns the network counts GET /v1/sessions lists for the
// one session.
func sessionNetwork(t *testing.T, url string) *calls.Network {
	t.Helper()
	resp, err := http.Get(url + "/v1/sessions")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Sessions []struct {
			Network *calls.Network `json:"network"`
		} `json:"sessions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if len(list.Sessions) != 1 {
		t.Fatalf("%d sessions listed; want 1", len(list.Sessions))
	}
	return list.Sessions[0].Network
}

var receivedMetric = regexp.MustCompile(`holdline_input_packets_total\{result="received",transport="webrtc"\} (\d+)`)

func metricReceived(t *testing.T, url string) uint64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := receivedMetric.FindSubmatch(b)
	if m == nil {
		t.Fatalf("no holdline_input_packets_total{result=\"received\"} in the metrics")
	}
	n, _ := strconv.ParseUint(string(m[1]), 10, 64)
	return n
}

// A WebRTC session lists what the network did to its caller's audio, over
// all its connections: the counts of a connection replaced on a resume
// stay, in the listing and in the metrics, which never go back.
func TestSessionsListTheirInputsNetworkCounts(t *testing.T) {
	hs, _, _ := newServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := rtctest.Dial(ctx, hs.URL, rtctest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var first *calls.Network
	waitFor(t, ctx, func() bool {
		first = sessionNetwork(t, hs.URL)
		return first != nil && first.PacketsReceived >= 25
	})
	if first.JitterDelayMS <= 0 || first.Lost != 0 || first.Late != 0 {
		t.Errorf("network %+v", *first)
	}
	if m := metricReceived(t, hs.URL); m < first.PacketsReceived {
		t.Errorf("metrics count %d packets received; the session %d", m, first.PacketsReceived)
	}

	r, err := rtctest.Dial(ctx, hs.URL, rtctest.Options{ResumeToken: c.ResumeToken})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c.Close()
	after := sessionNetwork(t, hs.URL)
	if after == nil || after.PacketsReceived < first.PacketsReceived {
		t.Fatalf("after the resume the session counts %+v; before it %+v", after, *first)
	}
	waitFor(t, ctx, func() bool { return sessionNetwork(t, hs.URL).PacketsReceived >= after.PacketsReceived+25 })
	if m := metricReceived(t, hs.URL); m < after.PacketsReceived+25 {
		t.Errorf("metrics count %d packets received; want at least %d", m, after.PacketsReceived+25)
	}
}

package carrier_test

import (
	"fmt"
	"os"

	"github.com/holdline/holdline/carrier"
)

// The webhook's answer to a call on a Telnyx number: the stream, with the
// token and the parties as parameters.
func ExampleTelnyxTeXML() {
	os.Stdout.Write(carrier.TelnyxTeXML("wss://agent.example.com/v1/telnyx/stream", map[string]string{
		carrier.ParamToken: "9f86d081884c7d65",
		carrier.ParamFrom:  "+13122010094",
		carrier.ParamTo:    "+13122123456",
	}))
	// Output:
	// <?xml version="1.0" encoding="UTF-8"?>
	// <Response><Connect><Stream url="wss://agent.example.com/v1/telnyx/stream" track="inbound_track" codec="PCMU" bidirectionalMode="rtp" bidirectionalCodec="PCMU" bidirectionalSamplingRate="8000"><Parameter name="from" value="+13122010094"/><Parameter name="to" value="+13122123456"/><Parameter name="token" value="9f86d081884c7d65"/></Stream></Connect></Response>
}

// The webhook's answer to a call on a Plivo number: Plivo's numbers come
// without "+", and its extraHeaders take letters and digits only.
func ExamplePlivoXML() {
	xml, err := carrier.PlivoXML("wss://agent.example.com/v1/plivo/stream", map[string]string{
		carrier.ParamToken: "9f86d081884c7d65",
		carrier.ParamFrom:  "14155550100",
		carrier.ParamTo:    "14155550199",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	os.Stdout.Write(xml)
	// Output:
	// <?xml version="1.0" encoding="UTF-8"?>
	// <Response><Stream bidirectional="true" keepCallAlive="true" audioTrack="inbound" contentType="audio/x-mulaw;rate=8000" extraHeaders="from=14155550100,to=14155550199,token=9f86d081884c7d65">wss://agent.example.com/v1/plivo/stream</Stream></Response>
}

// Decoding a Plivo start: the answer's parameters are in Params.
func ExampleCodec_plivoStart() {
	ev, err := carrier.Plivo.Decode([]byte(`{"event":"start","sequenceNumber":1,
		"start":{"callId":"12345678-1234-1234-1234-123456789abc","streamId":"87654321-4321-4321-4321-cba987654321",
		"accountId":"MAXXXXXXXXXXXXXXXXXX","tracks":["inbound"],"mediaFormat":{"encoding":"audio/x-mulaw","sampleRate":8000}},
		"extra_headers":"from=14155550100,to=14155550199,token=9f86d081884c7d65"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ev.Kind == carrier.Start, ev.StreamID, ev.Encoding, ev.Rate)
	fmt.Println(ev.Params[carrier.ParamFrom], ev.Params[carrier.ParamTo], ev.Params[carrier.ParamToken])
	// Output:
	// true 87654321-4321-4321-4321-cba987654321 audio/x-mulaw 8000
	// 14155550100 14155550199 9f86d081884c7d65
}
